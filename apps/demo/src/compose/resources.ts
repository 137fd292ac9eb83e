// The layers the guided run shares between its parts, each opened on first use and closed once
// at the end — the lifecycle a backend gives them too: create at start-up, dispose on shutdown.
import type { SandboxEngine } from '@coda/sandbox-isolate';
import type { ParserHost, ParserRuntime } from '@coda/sandbox-parser-host';
import type { SubprocessSandbox } from '@coda/sandbox-subprocess';
import { createDemoGuards, guidedRunGuardSettings } from './guards.ts';
import { createDemoEngine } from './isolate-engine.ts';
import { type OpenLimitStore, openLimitStore } from './limit-store.ts';
import { createTelemetryParserHost } from './parser-host.ts';
import { createRestrictedSandbox } from './subprocess-sandbox.ts';

/** Layers opened lazily for the parts of one run. */
export interface DemoResources {
  /** The isolate engine with the sample data behind `dataProxy`. */
  engine(): Promise<SandboxEngine>;
  /** The tier 3/4 store: in memory, or Redis when REDIS_URL is set. */
  limitStore(): Promise<OpenLimitStore>;
  /** The telemetry parsers' host for `runtime` (JavaScript by default). */
  parserHost(runtime?: ParserRuntime): ParserHost;
  /** Commands under the restrictive policy (stateless: nothing to close). */
  subprocessSandbox(): SubprocessSandbox;
  /** Closes whatever was opened. */
  close(): Promise<void>;
}

/** Creates the resources of one run; nothing opens until a part asks. */
export function createDemoResources(env: NodeJS.ProcessEnv = process.env): DemoResources {
  let engine: Promise<SandboxEngine> | undefined;
  let store: Promise<OpenLimitStore> | undefined;
  const parserHosts = new Map<ParserRuntime, ParserHost>();
  let sandbox: SubprocessSandbox | undefined;
  const limitStore = () => {
    store ??= openLimitStore(env.REDIS_URL);
    return store;
  };
  return {
    engine() {
      // The engine's guards key on the execution context: snippets and attacks run without a
      // user or turn and pass; the limits part names both and meets tiers 3 and 4.
      engine ??= limitStore().then(({ store: opened }) =>
        createDemoEngine({ guards: createDemoGuards(opened, guidedRunGuardSettings, 'allow') }),
      );
      return engine;
    },
    limitStore,
    parserHost(runtime = 'node') {
      let host = parserHosts.get(runtime);
      if (host === undefined) {
        host = createTelemetryParserHost(runtime);
        parserHosts.set(runtime, host);
      }
      return host;
    },
    subprocessSandbox() {
      sandbox ??= createRestrictedSandbox();
      return sandbox;
    },
    async close() {
      // The engine first: its executions may still hold leases in the store.
      await engine?.then((opened) => opened.dispose()).catch(() => {});
      await Promise.allSettled([
        store?.then((opened) => opened.close()),
        ...[...parserHosts.values()].map((host) => host.close()),
      ]);
    },
  };
}
