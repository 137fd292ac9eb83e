import { describe, expect, it } from 'vitest';
import { importedPackages, readReadme } from './readme-examples.ts';

const readme = [
  '# pkg',
  '',
  '```sh',
  'npm install @coda/pkg @coda/sandbox-core ioredis   # a comment',
  '```',
  '',
  '```ts',
  "import { a } from '@coda/pkg';",
  '```',
  '',
  '<!-- fragment -->',
  '```ts',
  'new Redis(url);',
  '```',
  '',
  'Save this as `parsers.mjs`:',
  '',
  '<!-- file: parsers.mjs -->',
  '```js',
  'export const p = 1;',
  '```',
  '',
  '<!-- file: parsers.py -->',
  '```python',
  'def p(payload):',
  '    return 1',
  '```',
  '',
  '<!-- fragment -->',
  '',
  'A paragraph: the marker above no longer applies.',
  '',
  '```javascript',
  'console.log(1);',
  '```',
  '',
  '```json',
  '{}',
  '```',
  '',
].join('\n');

describe('readReadme', () => {
  it('finds the install line, runnable blocks, files and fragments', () => {
    expect(readReadme(readme)).toEqual({
      install: ['@coda/pkg', '@coda/sandbox-core', 'ioredis'],
      runnable: [
        { language: 'ts', code: "import { a } from '@coda/pkg';\n", line: 8 },
        { language: 'js', code: 'console.log(1);\n', line: 34 },
      ],
      files: [
        { language: 'js', code: 'export const p = 1;\n', line: 20, name: 'parsers.mjs' },
        {
          language: 'python',
          code: 'def p(payload):\n    return 1\n',
          line: 25,
          name: 'parsers.py',
        },
      ],
      fragments: 1,
    });
  });

  it('has no install line when no sh block says npm install', () => {
    expect(readReadme('```sh\npnpm demo\n```\n').install).toBeUndefined();
  });
});

describe('importedPackages', () => {
  it('names the packages of bare specifiers, without builtins and relative paths', () => {
    const code = [
      "import { a } from '@coda/sandbox-core';",
      "import type { B } from '@coda/sandbox-isolate/mcp';",
      "import { Redis } from 'ioredis';",
      "import { z } from 'zod/v4';",
      "import { join } from 'node:path';",
      "import './side.mjs';",
      "const m = await import('execa');",
      "const n = await import('/abs/path.js');",
    ].join('\n');
    expect(importedPackages(code)).toEqual([
      '@coda/sandbox-core',
      '@coda/sandbox-isolate',
      'ioredis',
      'zod',
      'execa',
    ]);
  });
});
