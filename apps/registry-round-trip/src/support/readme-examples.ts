// What a README asks a reader to do: the `npm install` line, the TypeScript/JavaScript blocks
// to run, the files to save first and the fragments that are not meant to run on their own.
//
// Markers (an HTML comment on the line before a block; GitHub does not render it):
// - `<!-- fragment -->`: the block is part of a larger program (an option shape, a method
//   call on something built elsewhere); it is not run.
// - `<!-- file: NAME -->`: the block is a file the examples import (a parser module, in any
//   language: `parsers.mjs`, `parsers.py`); it is saved as NAME next to them and not run by
//   itself. Say the name in the text too.
// Every other ts/js block is a complete program, run as written with plain `node`.
import MarkdownIt from 'markdown-it';

/** A block of a README, with the line its code starts on (1-based) for messages. */
export interface ReadmeBlock {
  readonly language: 'ts' | 'js';
  readonly code: string;
  readonly line: number;
}

/** A block saved as a file: `language` is its fence's info word (`js`, `py`, ...). */
export interface ReadmeFile {
  readonly language: string;
  readonly code: string;
  readonly line: number;
  readonly name: string;
}

export interface ReadmeInstructions {
  /** The package names of the first `npm install` line, or undefined when there is none. */
  readonly install: readonly string[] | undefined;
  /** Blocks to run, in order. */
  readonly runnable: readonly ReadmeBlock[];
  /** Blocks to save under a name before the runnable ones run (any language: a `.py` module too). */
  readonly files: readonly ReadmeFile[];
  readonly fragments: number;
}

const languages: Record<string, 'ts' | 'js'> = {
  ts: 'ts',
  typescript: 'ts',
  js: 'js',
  javascript: 'js',
  mjs: 'js',
};
const shells = new Set(['sh', 'bash', 'shell', 'console']);
const marker = /^<!--\s*(fragment|file:\s*(\S+))\s*-->\s*$/;

/** The arguments of `npm install a b  # comment` that are not flags. */
function installedNames(script: string): string[] | undefined {
  for (const line of script.split('\n')) {
    const words = line.replace(/#.*$/, '').trim().split(/\s+/);
    if (words[0] === 'npm' && (words[1] === 'install' || words[1] === 'i')) {
      return words.slice(2).filter((word) => !word.startsWith('-'));
    }
  }
  return undefined;
}

export function readReadme(markdown: string): ReadmeInstructions {
  const tokens = new MarkdownIt({ html: true }).parse(markdown, {});
  let install: string[] | undefined;
  const runnable: ReadmeBlock[] = [];
  const files: ReadmeFile[] = [];
  let fragments = 0;
  let pending: RegExpExecArray | null = null;
  for (const token of tokens) {
    if (token.type === 'html_block') {
      pending = marker.exec(token.content.trim());
      continue;
    }
    if (token.type !== 'fence') {
      pending = null; // a marker applies only to the block right after it
      continue;
    }
    const info = token.info.trim().split(/\s+/)[0] ?? '';
    const language = languages[info];
    const block = { code: token.content, line: (token.map?.[0] ?? 0) + 2 };
    if (shells.has(info)) install ??= installedNames(token.content);
    if (pending?.[2] !== undefined && language === undefined) {
      files.push({ ...block, language: info, name: pending[2] });
      pending = null;
      continue;
    }
    if (language === undefined) {
      pending = null;
      continue;
    }
    if (pending?.[1] === 'fragment') fragments += 1;
    else if (pending?.[2] !== undefined) files.push({ ...block, language, name: pending[2] });
    else runnable.push({ ...block, language });
    pending = null;
  }
  return { install, runnable, files, fragments };
}

/**
 * The packages a block imports by bare name (`from 'ioredis'`, `import('@coda/x/sub')` gives
 * `ioredis`, `@coda/x`), without `node:` builtins and relative paths.
 */
export function importedPackages(code: string): string[] {
  const specifiers = [...code.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*['"]([^'"]+)['"]/g)].map(
    (match) => match[1] ?? '',
  );
  const names = specifiers
    .filter((specifier) => !/^(node:|\.|\/)/.test(specifier))
    .map((specifier) =>
      specifier
        .split('/')
        .slice(0, specifier.startsWith('@') ? 2 : 1)
        .join('/'),
    );
  return [...new Set(names)];
}
