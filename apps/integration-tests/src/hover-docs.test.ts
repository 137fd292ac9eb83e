// What an editor shows when a user hovers an option in code that calls the public entries: the
// field's doc comment, not a bare type derived from a zod schema. Asked of TypeScript's own
// language service, over a sample file that imports each package the way a user would.
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const sampleFile = join(import.meta.dirname, 'hover-sample.ts');
const sample = `
import { SandboxEngine } from '@coda/sandbox-isolate';
import { createRateLimitGuard, createMemoryLimitStore } from '@coda/sandbox-limits-redis';
import { createParserHost } from '@coda/sandbox-parser-host';
import { createSandbox } from '@coda/sandbox-subprocess';

createSandbox({ allowNetwork: false });
new SandboxEngine({ maxConcurrent: 4, limits: { timeoutMs: 1_000 } });
createParserHost({ module: 'parsers.mjs', warmSpare: false });
createRateLimitGuard({ store: createMemoryLimitStore(), failMode: 'open', limit: 1, windowMs: 1 });
`;

function languageService(): ts.LanguageService {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(import.meta.dirname, '..', 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  );
  if (config === undefined) throw new Error('no tsconfig');
  return ts.createLanguageService({
    getScriptFileNames: () => [sampleFile],
    getScriptVersion: () => '1',
    getScriptSnapshot: (file) => {
      const text = file === sampleFile ? sample : ts.sys.readFile(file);
      return text === undefined ? undefined : ts.ScriptSnapshot.fromString(text);
    },
    getCurrentDirectory: () => import.meta.dirname,
    getCompilationSettings: () => config.options,
    getDefaultLibFileName: ts.getDefaultLibFilePath,
    fileExists: (file) => file === sampleFile || ts.sys.fileExists(file),
    readFile: (file) => (file === sampleFile ? sample : ts.sys.readFile(file)),
    readDirectory: ts.sys.readDirectory,
    directoryExists: ts.sys.directoryExists,
    getDirectories: ts.sys.getDirectories,
  });
}

describe('hovering an option', () => {
  const service = languageService();
  const hover = (field: string) => {
    const info = service.getQuickInfoAtPosition(sampleFile, sample.indexOf(`${field}:`) + 1);
    return {
      type: ts.displayPartsToString(info?.displayParts),
      doc: ts.displayPartsToString(info?.documentation),
    };
  };

  it('compiles: the sample is what a user writes', () => {
    const errors = service.getSemanticDiagnostics(sampleFile);
    expect(errors.map((error) => ts.flattenDiagnosticMessageText(error.messageText, '\n'))).toEqual(
      [],
    );
  });

  it.each([
    ['allowNetwork', 'Let commands use the network. Default `true`.'],
    [
      'maxConcurrent',
      'Tier 5: most executions running at once; more are refused with `CAPACITY`. Default 8.',
    ],
    [
      'timeoutMs',
      'Wall-clock limit of the whole execution, in milliseconds (at most 2³¹ − 1). Default 30 000.',
    ],
    [
      'warmSpare',
      'Keep children started (`spares` of them) and waiting for the next calls with the default\nlimits, so a call does not wait for the interpreter to start. Default `true`.',
    ],
  ])('%s shows its doc comment', (field, doc) => {
    expect(hover(field).doc).toBe(doc);
  });

  it('failMode shows its doc comment', () => {
    expect(hover('failMode').doc).toMatch(
      /^When the store fails or does not answer within `timeoutMs`/,
    );
  });
});
