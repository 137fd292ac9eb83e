// The end-to-end agent example of docs/isolate.md, run exactly as the page shows it: the block
// after `<!-- example: agent -->` is fed to plain `node` as TypeScript (from this package, so that
// `@coda/sandbox-isolate` and `zod` resolve), and what it prints must be the block after
// `<!-- output: agent -->`.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const page = readFileSync(new URL('../../../docs/isolate.md', import.meta.url), 'utf8');

/** The fenced block right after the marker comment `<!-- NAME -->`. */
function blockAfter(marker: string): string {
  const found = new RegExp(`<!-- ${marker} -->\\n\`\`\`[a-z]*\\n([\\s\\S]*?)\\n\`\`\`\\n`).exec(
    page,
  );
  if (found?.[1] === undefined)
    throw new Error(`docs/isolate.md has no block after <!-- ${marker} -->`);
  return found[1];
}

it('runs the agent example of docs/isolate.md and prints what the page says it prints', () => {
  const child = spawnSync(
    process.execPath,
    ['--no-node-snapshot', '--conditions=@coda/source', '--input-type=module-typescript'],
    {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      input: blockAfter('example: agent'),
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  expect(child.status, child.stderr).toBe(0);
  expect(child.stdout).toBe(`${blockAfter('output: agent')}\n`);
}, 70_000);
