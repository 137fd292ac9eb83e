import { SandboxValidationError } from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import { createDemoServer, type DemoServerOptions } from './create-server.ts';

describe('createDemoServer', () => {
  it('refuses bad options, naming each field', async () => {
    const options = { runner: {}, guards: [{}], maxBodyBytes: -1, port: 1 };
    const error = await createDemoServer(options as unknown as DemoServerOptions).catch(
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(SandboxValidationError);
    const paths = (error as SandboxValidationError).issues.map((issue) => issue.path).sort();
    expect(paths).toEqual(['guards.0', 'maxBodyBytes', 'port', 'runner']);
  });
});
