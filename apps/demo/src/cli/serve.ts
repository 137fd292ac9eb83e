// `pnpm demo serve`: the isolate engine behind the HTTP API and the playground page, with the
// guards on the shared store, until SIGINT/SIGTERM shuts it down gracefully.
import { createDemoGuards, type GuardSettings } from '../compose/guards.ts';
import { createDemoEngine } from '../compose/isolate-engine.ts';
import { openLimitStore } from '../compose/limit-store.ts';
import { createServerLogger } from '../compose/server-logger.ts';
import { createDemoServer } from '../server/create-server.ts';
import type { Style } from './style.ts';

/** What `serve` was asked for on the command line. */
export interface ServeCommand {
  port: number;
  host: string;
  /** The admission limits (flags, variables or defaults). */
  admission: GuardSettings;
}

/** Starts the server and resolves with the exit code once it has shut down. */
export async function serve(command: ServeCommand, style: Style): Promise<number> {
  const store = await openLimitStore(process.env.REDIS_URL);
  const engine = createDemoEngine();
  const logger = createServerLogger(process.stderr);
  // Guards run in the server (admission before the stream opens, so a refusal is a 429), not in
  // the engine: an execution is counted once.
  const server = await createDemoServer({
    runner: engine,
    guards: createDemoGuards(store.store, command.admission),
    admission: command.admission,
    logger,
  });
  const address = await server.listen(command.port, command.host);
  const { ratePerUser, burst, maxExecutionsPerTurn, maxConcurrentPerUser } = command.admission;
  console.log(
    `${style.bold('Coda Sandbox playground')} on ${style.cyan(`http://${address.address}:${address.port}/`)}` +
      ` · Ctrl-C to stop\n` +
      style.dim(
        `limits per user: ${ratePerUser} a minute (bursts of ${burst}), ${maxConcurrentPerUser} at once,` +
          ` ${maxExecutionsPerTurn} per turn · store: ${store.description}`,
      ),
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
  logger.flush();
  console.log('Stopped.');
  return 0;
}
