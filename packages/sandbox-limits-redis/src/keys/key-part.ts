// Turns identifiers of any content into key parts that are safe inside a Redis Cluster hash tag.
import { createHash } from 'node:crypto';

// Short identifiers made only of these characters stay readable in keys. None of them is a brace
// (which would move the hash tag), a separator used by the key layout, or whitespace.
const readable = /^[A-Za-z0-9._@-]{1,64}$/;

/**
 * A key part for `id`: `=id` when it is short and plain, else `#` and the SHA-256 of its UTF-16
 * code units (lossless even for lone surrogates, which UTF-8 would replace). The two forms cannot
 * collide, and neither contains `{`, `}`, `/`, `|` or `:`.
 */
export function keyPart(id: string): string {
  if (readable.test(id)) return `=${id}`;
  return `#${createHash('sha256').update(Buffer.from(id, 'utf16le')).digest('base64url')}`;
}

/** The hash tag of one entity: every key of that entity lands in the same cluster slot. */
export function hashTag(part: string, ...more: readonly string[]): string {
  return more.length === 0 ? `{${part}}` : `{${part}|${more.join('|')}}`;
}
