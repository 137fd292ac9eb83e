// `pnpm demo serve`: the isolate engine behind the HTTP API and the playground page, with the
// guards on the shared store, until SIGINT/SIGTERM shuts it down gracefully.
import type { Logger } from '@coda/sandbox-core';
import { createDemoGuards } from '../compose/guards.ts';
import { createDemoEngine } from '../compose/isolate-engine.ts';
import { openLimitStore } from '../compose/limit-store.ts';
import { createDemoServer } from '../server/create-server.ts';
import type { Style } from './style.ts';

/** Starts the server and resolves when it has shut down. */
export async function serve(port: number, host: string, style: Style): Promise<number> {
  const store = await openLimitStore(process.env.REDIS_URL);
  const engine = createDemoEngine();
  // Guards run in the server (admission before the stream opens, so a refusal is a 429), not in
  // the engine: an execution is counted once.
  const server = await createDemoServer({
    runner: engine,
    guards: createDemoGuards(store.store),
    logger: consoleLogger,
  });
  const address = await server.listen(port, host);
  console.log(
    `${style.bold('Coda Sandbox playground')} on ${style.cyan(`http://${address.address}:${address.port}/`)}` +
      ` · limits store: ${store.description} · Ctrl-C to stop`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  console.log('Shutting down: ending running executions… (again to force)');
  // A second signal means the user will not wait for the grace period.
  const force = () => process.exit(130);
  process.once('SIGINT', force);
  process.once('SIGTERM', force);
  await server.close();
  await engine.dispose();
  await store.close();
  console.log('Stopped.');
  return 0;
}

/** One line per log call on stderr: enough for a demo; pass pino in a real backend. */
const consoleLogger: Logger = {
  debug: () => {},
  info: (fields: object | string, message?: string) => log('info', fields, message),
  warn: (fields: object | string, message?: string) => log('warn', fields, message),
  error: (fields: object | string, message?: string) => log('error', fields, message),
};

function log(level: string, fields: object | string, message?: string): void {
  const text = typeof fields === 'string' ? fields : `${message ?? ''} ${JSON.stringify(fields)}`;
  console.error(`[${level}] ${text}`);
}
