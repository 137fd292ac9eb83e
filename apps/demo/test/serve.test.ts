// `pnpm demo serve` as a process: it listens, serves, and on SIGTERM ends the running execution
// with CANCELLED on its stream before exiting 0.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { SandboxEvent } from '@coda/sandbox-core';
import { expect, it } from 'vitest';
import { readSse } from './helpers/sse.ts';

const appDirectory = fileURLToPath(new URL('..', import.meta.url));

it('serves until SIGTERM, then shuts down gracefully', async () => {
  const child = spawn(
    process.execPath,
    ['--conditions=@coda/source', '--no-node-snapshot', 'src/main.ts', 'serve', '--port', '0'],
    {
      cwd: appDirectory,
      env: { ...process.env, REDIS_URL: '', NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  try {
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      output += text;
    });
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', () => {
        const match = /http:\/\/127\.0\.0\.1:\d+/.exec(output);
        if (match) resolve(match[0]);
      });
      child.once('exit', () => reject(new Error(`serve exited early: ${output}`)));
    });
    expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ status: 'ok', running: 0 });

    const response = await fetch(`${url}/v1/executions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-user-id': 'serve-test' },
      body: JSON.stringify({
        code: "reportStatus('started');\nwhile (true) { await Promise.resolve(); }",
        limits: { timeoutMs: 25_000 },
      }),
    });
    const events = readSse(response.body!);
    expect((await events.next()).value).toMatchObject({ type: 'status', message: 'started' });

    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const rest: SandboxEvent[] = [];
    for await (const event of events) rest.push(event);
    expect(rest).toEqual([expect.objectContaining({ type: 'error', code: 'CANCELLED' })]);
    const [code] = await exited;
    expect(code).toBe(0);
    expect(output).toContain('Stopped.');
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
}, 60_000);
