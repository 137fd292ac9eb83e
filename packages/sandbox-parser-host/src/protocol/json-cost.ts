// What a response will cost the host once `JSON.parse` has built it, estimated in one pass over
// the text before parsing, so that a child cannot make the host hold far more than the bytes it
// sent. Both sides use it: the Node runner on the result it is about to send, the host on every
// response that arrives. The runner loads this file under Node's permission model: it imports
// nothing. Measured on Node 24 (docs/performance.md, "host memory per result"): 16 MiB of `{}`
// elements became 341 MiB of heap, of `[[0]]` 320 MiB, of objects with distinct keys 209 MiB,
// while 16 MiB of numbers took 64 MiB and of strings about their size.

/** The bytes of host memory a response may take once parsed, per byte of `maxOutputBytes`. */
export const resultMemoryFactor = 8;

/** Room beyond `maxOutputBytes` for the response envelope and an error message (16 Ki chars). */
export const envelopeAllowance = 128 * 1024;

/** The estimated heap a response may take on the host for `maxOutputBytes`. */
export function resultMemoryBudget(maxOutputBytes: number): number {
  return resultMemoryFactor * (maxOutputBytes + envelopeAllowance);
}

/** Why a result over {@link resultMemoryBudget} is refused; the same words on both sides. */
export function overBudgetMessage(maxOutputBytes: number, characters: number): string {
  return (
    `parser result would take over ${resultMemoryBudget(maxOutputBytes)} bytes of host memory once parsed ` +
    `(${resultMemoryFactor} × (maxOutputBytes + ${envelopeAllowance})): ` +
    `too many small values for its ${characters} characters`
  );
}

/**
 * Why a result's JSON text may not be sent, in the same words from every runner: over
 * `maxOutputBytes` (`size` is its UTF-8 length, measured by the caller with the functions it
 * bound before parser code ran), or over {@link resultMemoryBudget} once parsed. Undefined when
 * it may be sent.
 */
export function resultRefusal(
  dataJson: string,
  size: number,
  maxOutputBytes: number,
): string | undefined {
  if (size > maxOutputBytes) {
    return `parser result is ${size} bytes, over maxOutputBytes (${maxOutputBytes})`;
  }
  const budget = resultMemoryBudget(maxOutputBytes);
  const cost = estimateParsedCost(dataJson, Number.POSITIVE_INFINITY, budget);
  if ('bytes' in cost && cost.bytes > budget) {
    return overBudgetMessage(maxOutputBytes, dataJson.length);
  }
  return undefined;
}

/** Bytes charged per item (upper bounds of what V8 took in the measurements above). */
const cost = Object.freeze({
  /** Each byte of text: the text itself (UTF-16 at worst) while it is parsed, and string contents. */
  perByte: 2,
  object: 64,
  array: 40,
  /** Each value: its slot in the array or object that holds it. */
  value: 8,
  /** Each string value or key: a string header. */
  string: 16,
  /** Each key not seen before: a new hidden class (map) and an internalised string. */
  newKey: 96,
});

/** Distinct keys remembered; past this every further key is charged as new. */
const rememberedKeys = 65_536;

/** Why a text is refused, or its estimated cost in bytes. */
export type ResponseCost = { refused: 'depth' } | { bytes: number };

/**
 * Estimates the host memory `JSON.parse(json)` would take; stops as soon as the estimate passes
 * `budget` (returning what it reached) or nesting passes `maxDepth`.
 */
export function estimateParsedCost(json: string, maxDepth: number, budget: number): ResponseCost {
  let bytes = json.length * cost.perByte;
  let depth = 0;
  const keys = new Set<string>();
  const length = json.length;
  for (let index = 0; index < length && bytes <= budget; index++) {
    const code = json.charCodeAt(index);
    if (code === 34) {
      const start = index + 1;
      for (index++; index < length; index++) {
        const inner = json.charCodeAt(index);
        if (inner === 92) index++;
        else if (inner === 34) break;
      }
      bytes += cost.string;
      let next = index + 1;
      while (next < length && json.charCodeAt(next) <= 32) next++;
      if (json.charCodeAt(next) === 58) {
        // A key: its slot is charged with its value; a new one costs a hidden class.
        if (keys.size >= rememberedKeys) bytes += cost.newKey;
        else {
          const key = json.slice(start, index);
          if (!keys.has(key)) {
            keys.add(key);
            bytes += cost.newKey;
          }
        }
      } else {
        bytes += cost.value;
      }
    } else if (code === 123 || code === 91) {
      if (++depth > maxDepth) return { refused: 'depth' };
      bytes += (code === 123 ? cost.object : cost.array) + cost.value;
    } else if (code === 125 || code === 93) {
      depth--;
    } else if (
      code === 45 ||
      (code >= 48 && code <= 57) ||
      code === 116 ||
      code === 102 ||
      code === 110
    ) {
      // A number, true, false or null: one slot. Skip the rest of the literal.
      bytes += cost.value;
      while (index + 1 < length) {
        const following = json.charCodeAt(index + 1);
        if (following === 44 || following === 93 || following === 125 || following <= 32) break;
        index++;
      }
    }
  }
  return { bytes };
}
