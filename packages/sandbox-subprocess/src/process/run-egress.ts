// One run's way to the sandbox's egress proxy: opens the listener the run's plan asks for (a
// Unix socket bound into bubblewrap, or a port on 127.0.0.1 for the Landlock backend, known only
// once it listens), and gives the run's events and report from it.
import type { NetworkPolicy, NetworkReport } from '@coda/sandbox-core';
import type { EgressListener, EgressProxy } from '../egress/egress-proxy.ts';
import { NetworkActivity } from '../egress/egress-session.ts';
import type { EgressEndpoints } from './launch-plan.ts';

/** The egress of one run under a network allowlist. */
export class RunEgress implements EgressEndpoints {
  /** The run's events as they happen, and its report so far. */
  readonly activity: NetworkActivity = new NetworkActivity(() => this.report());
  readonly #proxy: EgressProxy;
  readonly #policy: NetworkPolicy;
  /** The listener, once asked for (a TCP one may still be opening). */
  #listener: EgressListener | Promise<EgressListener> | undefined;
  #opened: EgressListener | undefined;

  constructor(proxy: EgressProxy, policy: NetworkPolicy) {
    this.#proxy = proxy;
    this.#policy = policy;
  }

  unixSocket(): string {
    const listener = this.#proxy.openUnix(this.#policy, { forwarded: true });
    this.#listener = listener;
    this.#take(listener);
    if (!('path' in listener.address)) throw new Error('openUnix gave no socket path');
    return listener.address.path;
  }

  async loopbackPort(): Promise<number> {
    const pending = this.#proxy.openTcp(this.#policy);
    this.#listener = pending;
    const listener = await pending;
    // Taken before the port is handed on: the command can connect only once it has it.
    this.#take(listener);
    if (!('port' in listener.address)) throw new Error('openTcp gave no port');
    return listener.address.port;
  }

  #take(listener: EgressListener): void {
    this.#opened = listener;
    listener.session.activity.on('event', (event) => this.activity.emit('event', event));
  }

  /** Destinations reached and connections refused so far (empty before a listener opened). */
  report(): NetworkReport {
    return this.#opened?.session.report() ?? { allowed: [], denied: [] };
  }

  /** Closes the run's listener, if one was opened (or is opening); never rejects. */
  async close(): Promise<void> {
    const listener = await Promise.resolve(this.#listener).catch(() => undefined);
    await listener?.close();
  }
}
