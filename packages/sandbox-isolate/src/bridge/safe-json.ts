// JSON that arrives from an isolate is hostile: parse it without letting a `__proto__` key reach
// a prototype, and keep host file paths out of any text handed back to user code.
import type { JsonValue } from '@coda/sandbox-core';

/**
 * `JSON.parse` that drops every `__proto__` key, at any depth. `JSON.parse` itself defines such a
 * key as an own property, but a host that later copies the object with `Object.assign` or a
 * spread into a plain object would invoke the `__proto__` setter; dropping the key closes that.
 */
export function parseUntrustedJson(text: string): JsonValue {
  // A reviver makes parsing several times slower; a key can only spell __proto__ literally or
  // through a \u escape, so text with neither parses without one.
  if (!text.includes('__proto__') && !text.includes('\\u')) return JSON.parse(text) as JsonValue;
  return JSON.parse(text, dropProtoKey) as JsonValue;
}

function dropProtoKey(key: string, value: unknown): unknown {
  return key === '__proto__' ? undefined : value;
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
