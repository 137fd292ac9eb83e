// JSON that arrives from an isolate is hostile: parse it without letting a `__proto__` key reach
// a prototype, without recursion (a deep value must not overflow the host's stack), and keep host
// file paths out of any text handed back to user code.
import type { JsonValue } from '@coda/sandbox-core';

/**
 * Deepest nesting of arrays and objects a value crossing the bridge (result, data-request params,
 * status data) may have. The isolate refuses deeper values before they cross: deeper data is of no
 * use to a model, and recursive consumers (`JSON.stringify`, deep equality, loggers) overflow their
 * stack at a few thousand levels.
 */
export const maxJsonDepth = 2_000;

/**
 * `JSON.parse` that drops every `__proto__` key, at any depth. `JSON.parse` itself defines such a
 * key as an own property, but a host that later copies the object with `Object.assign` or a
 * spread into a plain object would invoke the `__proto__` setter; dropping the key closes that.
 * V8's parser is iterative; the removal walks with an explicit stack (a reviver would recurse and
 * overflow the host's stack on deep input), so no nesting depth makes this throw.
 */
export function parseUntrustedJson(text: string): JsonValue {
  const value = JSON.parse(text) as JsonValue;
  // A key can only spell __proto__ literally or through a \u escape.
  if (!text.includes('__proto__') && !text.includes('\\u')) return value;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const node = pending.pop();
    if (typeof node !== 'object' || node === null) continue;
    if (Array.isArray(node)) {
      for (const item of node) if (typeof item === 'object' && item !== null) pending.push(item);
      continue;
    }
    const record = node as Record<string, unknown>;
    if (Object.hasOwn(record, '__proto__')) Reflect.deleteProperty(record, '__proto__');
    for (const key in record) {
      const item = record[key];
      if (typeof item === 'object' && item !== null) pending.push(item);
    }
  }
  return value;
}

const absolutePath =
  /(?<![\w.:/-])(?:file:\/\/)?(?:\/[\w.@+~-]+){2,}\/?|\b[A-Za-z]:\\[^\s'"`<>|]+/g;

/** Replaces absolute file paths (POSIX, `file://` and Windows) in `text` with `<host>`. */
export function scrubHostPaths(text: string): string {
  return text.replace(absolutePath, '<host>');
}

/** Cuts `text` to at most `max` UTF-16 units, marking the cut. */
export function capText(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
