// The parser module the parser-host tests load: real functions run in real confined children.
import { fileURLToPath } from 'node:url';

/** Absolute path of test/fixtures/feed-parsers.mjs. */
export const feedParsersPath = fileURLToPath(
  new URL('../../test/fixtures/feed-parsers.mjs', import.meta.url),
);
