// Where in the user's own code an error happened, for a model to repair it: stacks cut down to
// user frames with lines counted in the user's code, the position of a syntax error, and the
// text of the line.
import { type JsonObject, SandboxErrorCode, type SandboxErrorJSON } from '@coda/sandbox-core';

/** A position in the user's code, both 1-based (columns in UTF-16 units, as V8 counts them). */
export interface CodeLocation {
  /** Line in the code as submitted, from 1. */
  line: number;
  /** Column in that line, from 1. */
  column: number;
}

/**
 * The name frames of user code carry. The bootstrap compiles user code with V8's AsyncFunction
 * constructor, whose frames read `eval at run (sandbox:bootstrap:L:C), <anonymous>:L:C`.
 */
export const userFileName = '<anonymous>';

/**
 * Lines V8's AsyncFunction constructor puts before the body (`(async function anonymous(\n) {\n`,
 * fixed by the spec's CreateDynamicFunction): body line 1 is line 3 of what it compiles. The body
 * starts a line of its own, so columns need no offset.
 */
const functionHeaderLines = 2;

/** A frame of user code as V8 writes it, inside the bootstrap's `run`. */
const dynamicFrame = /eval at run \(sandbox:bootstrap:\d+:\d+\), <anonymous>:(\d+):(\d+)/;
/** The top-level function of user code, once rewritten: `at eval (<anonymous>:1:7)`. */
const topLevelFrame = /^(\s+at (?:async )?)eval \((<anonymous>:\d+:\d+)\)$/;
/** Frames of builtins: no file, nothing of the host (`at Array.map (<anonymous>)`). */
const builtinFrame = /^\s+at (?:async )?[\w$.<> ]+ \((?:<anonymous>|native|index \d+)\)$/;
const frameLine = /^\s+at /;

/**
 * `stack` with only user frames (lines in the user's code, `at inner (<anonymous>:3:9)`,
 * `at <anonymous>:5:3` for the top level) and frames of builtins; bootstrap, isolated-vm and host
 * frames are dropped. `location` is the first user frame's position.
 */
export function userStack(stack: string): { stack: string; location: CodeLocation | undefined } {
  const lines = stack.split('\n');
  const kept: string[] = [];
  let location: CodeLocation | undefined;
  for (const line of lines) {
    if (!frameLine.test(line)) {
      // The header (`Name: message`, possibly several lines), before the first frame.
      if (kept.length === 0 || !frameLine.test(kept[kept.length - 1] ?? '')) kept.push(line);
      continue;
    }
    const match = dynamicFrame.exec(line);
    if (match !== null) {
      const at = { line: Number(match[1]) - functionHeaderLines, column: Number(match[2]) };
      if (at.line < 1) continue;
      const rewritten = line.replace(dynamicFrame, `${userFileName}:${at.line}:${at.column}`);
      // A function user code made itself (`new Function`) nests one more `eval at`: its own
      // lines are not the user's, but the frame is still user code.
      const direct = !rewritten.includes('eval at ');
      if (direct) location ??= at;
      kept.push(rewritten.replace(topLevelFrame, '$1$2'));
    } else if (builtinFrame.test(line)) {
      kept.push(line);
    }
  }
  return { stack: kept.join('\n'), location };
}

/** `(async function () {\n` + code + `\n})`: compiled for a syntax error's position only. */
export function syntaxProbeSource(code: string): string {
  return `(async function () {\n${code}\n})`;
}

/** isolated-vm's suffix on a compile error's message: ` [<anonymous>:L:C]`. */
const compileErrorSuffix = / \[<anonymous>:(\d+):(\d+)\]$/;

/**
 * The message and position of a syntax error from compiling {@link syntaxProbeSource} with
 * `lineOffset: -1` (so line 1 is the code's first line). A position past the code's last line is
 * the wrapper's closing brace: the code ended too early, which V8 calls "Unexpected token '}'"
 * about a brace the user never wrote; it becomes "Unexpected end of input" at the end of the code.
 */
export function syntaxErrorAt(
  compileMessage: string,
  code: string,
): { message: string; location: CodeLocation } | undefined {
  const match = compileErrorSuffix.exec(compileMessage);
  if (match === null) return undefined;
  const message = compileMessage.slice(0, match.index);
  const line = Number(match[1]);
  const column = Number(match[2]);
  const lines = codeLines(code);
  if (line > lines.length) {
    return {
      message: message === "Unexpected token '}'" ? 'Unexpected end of input' : message,
      location: endOfCode(lines),
    };
  }
  if (line < 1) return undefined;
  return { message, location: { line, column } };
}

/**
 * `location` if it is a position in `code` (the side that reports it is not trusted), with the
 * text of its line: what a model needs to see where its code failed.
 */
export function locateInCode(
  location: unknown,
  code: string,
): { location: CodeLocation; sourceLine: string } | undefined {
  if (typeof location !== 'object' || location === null) return undefined;
  const { line, column } = location as Record<string, unknown>;
  if (!Number.isSafeInteger(line) || !Number.isSafeInteger(column)) return undefined;
  if ((line as number) < 1 || (column as number) < 1) return undefined;
  const sourceLine = lineOf(code, line as number);
  if (sourceLine === undefined) return undefined;
  return { location: { line: line as number, column: column as number }, sourceLine };
}

/**
 * `error` with `details.location` checked against `code` and `details.sourceLine` added, or
 * without a location when it names no position in `code`.
 */
export function withSourceLine(error: SandboxErrorJSON, code: string): SandboxErrorJSON {
  const details = error.details;
  if (details === undefined || !('location' in details)) return error;
  const { location: _dropped, ...rest } = details;
  const found = locateInCode(details.location, code);
  if (found === undefined) return { ...error, details: rest };
  return {
    ...error,
    details: { ...rest, location: { ...found.location }, sourceLine: found.sourceLine },
  };
}

/**
 * The error of code that does not compile (JavaScript or TypeScript): `RUNTIME`, as V8's own
 * `SyntaxError`, with the position in the message, the stack and `details.location`.
 */
export function syntaxError(message: string, location: CodeLocation | undefined): SandboxErrorJSON {
  const at = location === undefined ? '' : `${userFileName}:${location.line}:${location.column}`;
  const details: JsonObject = {
    name: 'SyntaxError',
    stack: `SyntaxError: ${message}${at === '' ? '' : `\n    at ${at}`}`,
  };
  if (location !== undefined) details.location = { ...location };
  return {
    name: 'SandboxRuntimeError',
    code: SandboxErrorCode.RUNTIME,
    message:
      location === undefined
        ? `SyntaxError: ${message}`
        : `SyntaxError: ${message} (line ${location.line}, column ${location.column})`,
    details,
  };
}

/** Longest source line a detail carries: a model needs the line, not a minified bundle. */
const maxSourceLineChars = 1_000;

/** What V8 counts as a line break. */
const lineBreak = /\r\n|[\n\r\u2028\u2029]/;

/** Just past the last character of the code whose `lines` these are. */
export function endOfCode(lines: readonly string[]): CodeLocation {
  return { line: lines.length, column: (lines[lines.length - 1] ?? '').length + 1 };
}

/** The lines of `code`, split where V8 breaks them. */
export function codeLines(code: string): string[] {
  return code.split(lineBreak);
}

/** Line `line` (1-based) of `code`. */
function lineOf(code: string, line: number): string | undefined {
  const text = codeLines(code)[line - 1];
  if (text === undefined) return undefined;
  return text.length > maxSourceLineChars ? `${text.slice(0, maxSourceLineChars)}…` : text;
}
