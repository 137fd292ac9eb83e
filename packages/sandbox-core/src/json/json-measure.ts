// Measures JSON text from the other side of a trust boundary without parsing it: nesting depth
// and the number of values, in one pass over the characters. JSON.parse of deep or huge text blocks
// the thread that calls it (seconds for millions of levels) and a deep result then breaks whoever
// stringifies it, so a receiver measures first: the isolate engine's worker on what an isolate
// sends and the host on what a worker relays, the parser host on a child's response.

/** Why a text is refused: '' when it is within both bounds. */
export type JsonMeasureRefusal = '' | 'depth' | 'values';

/**
 * Whether `json` nests arrays and objects deeper than `maxDepth` or holds more than
 * `maxValues` values (the value itself, plus every array element and object member).
 */
export function measureJson(json: string, maxDepth: number, maxValues: number): JsonMeasureRefusal {
  let depth = 0;
  let values = 1;
  const length = json.length;
  for (let index = 0; index < length; index++) {
    const code = json.charCodeAt(index);
    if (code === 34) {
      // A string: skip to its closing quote, over escapes.
      for (index++; index < length; index++) {
        const inner = json.charCodeAt(index);
        if (inner === 92) index++;
        else if (inner === 34) break;
      }
    } else if (code === 91 || code === 123) {
      if (++depth > maxDepth) return 'depth';
      const next = json.charCodeAt(index + 1);
      // A non-empty container holds one more value than it has commas.
      if (next !== 93 && next !== 125 && ++values > maxValues) return 'values';
    } else if (code === 93 || code === 125) {
      depth--;
    } else if (code === 44 && ++values > maxValues) {
      return 'values';
    }
  }
  return values > maxValues ? 'values' : '';
}
