// Every layer resolves through its public entry, as a user installs it.
import { describe, expect, it } from 'vitest';

describe('public entries', () => {
  it.each([
    '@coda/sandbox-core',
    '@coda/sandbox-isolate',
    '@coda/sandbox-subprocess',
    '@coda/sandbox-parser-host',
    '@coda/sandbox-limits-redis',
  ])('%s imports', async (name) => {
    await expect(import(name)).resolves.toBeTypeOf('object');
  });
});
