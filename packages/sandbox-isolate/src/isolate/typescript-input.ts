// TypeScript input: Node's own type stripper turns it into the JavaScript the isolate runs, with
// every character where it was, so lines and columns of errors are those of the TypeScript.
import type { SandboxErrorJSON } from '@coda/sandbox-core';
import { type StripBounds, type StripEnded, stripInThread } from './type-stripper-thread.ts';
import { type CodeLocation, codeLines, endOfCode, syntaxError } from './user-code-location.ts';

/** The language of a snippet: `typescript` is stripped of its types before it runs. */
export type CodeLanguage = 'javascript' | 'typescript';

// User code is the body of an async function: `return` and `await` at its top level are only
// valid inside one, for the stripper as for V8.
const prefix = '(async function () {\n';
const suffix = '\n})';

/**
 * `code` with its types removed, or the `SyntaxError`-shaped error of TypeScript that does not
 * parse or uses syntax that needs more than removal (`enum`, `namespace` with values, parameter
 * properties: Node's strip mode, the same as `--experimental-strip-types` and TypeScript's
 * `erasableSyntaxOnly`). Types are removed, never checked. Strip mode puts whitespace where the
 * types were, so the JavaScript has the same length, lines and columns. The stripper runs in a
 * thread of its own (see type-stripper-thread.ts), ended past `bounds.deadlineMs` or when
 * `bounds.signal` aborts, which the answer then says (`ended`). `stripMs` is the strip's own time.
 */
export async function stripTypes(
  code: string,
  bounds: StripBounds,
): Promise<({ code: string } | { error: SandboxErrorJSON } | StripEnded) & { stripMs: number }> {
  const answer = await stripInThread(prefix + code + suffix, bounds);
  const { stripMs } = answer;
  if ('ended' in answer) return { ended: answer.ended, stripMs };
  if (!answer.ok) {
    return { error: syntaxError(answer.message, stripperLocation(answer.stack, code)), stripMs };
  }
  const stripped = answer.code;
  if (
    stripped.length !== prefix.length + code.length + suffix.length ||
    !stripped.startsWith(prefix) ||
    !stripped.endsWith(suffix)
  ) {
    // Not what strip mode promises: the positions of errors would be wrong, so do not run it.
    return { error: syntaxError('TypeScript could not be stripped in place', undefined), stripMs };
  }
  return { code: stripped.slice(prefix.length, stripped.length - suffix.length), stripMs };
}

/**
 * Where the stripper's error is. Node puts it at the head of the stack (the error carries no
 * field for it): `${sourceUrl}:${line}`, then a snippet of the source whose `^` marks are under
 * the error's columns. Lines count the wrapper's first line; one past the code's end is the
 * wrapper's closing line (the code ended too early).
 */
function stripperLocation(stack: string, code: string): CodeLocation | undefined {
  const head = /^[^\n]*:(\d+)\n/.exec(stack);
  if (head === null) return undefined;
  const line = Number(head[1]) - 1;
  const lines = codeLines(code);
  if (line > lines.length) return endOfCode(lines);
  if (line < 1) return undefined;
  const snippet = stack.slice(head[0].length, stack.search(/\n\S*SyntaxError \[/));
  const marks = /^( *)\^+ *$/m.exec(snippet);
  return {
    line,
    column: marks === null ? 1 : columnAt(lines[line - 1] ?? '', marks[1]?.length ?? 0),
  };
}

/** The snippet shows a tab as four spaces: the column in `text` under `offset` of the snippet. */
function columnAt(text: string, offset: number): number {
  let shown = 0;
  for (let index = 0; index < text.length; index++) {
    if (shown >= offset) return index + 1;
    shown += text[index] === '\t' ? 4 : 1;
  }
  return text.length + 1;
}
