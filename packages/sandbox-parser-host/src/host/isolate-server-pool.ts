// The isolate child of one host (`processModel: 'isolate'`), as the host's pool: one child that
// serves every call at once. A call that finds it dead or retired starts its replacement there
// and then (never a spawned child: a module for this model may not run under Node as it is).
import type { ParserLimits } from '@coda/sandbox-core';
import type { IsolateServer } from './isolate-server.ts';
import type { RunnerPool } from './spare-pool.ts';

/** At most one isolate child in service. */
export class IsolateServerPool implements RunnerPool<IsolateServer> {
  /** Always 1: one child per host. */
  readonly size = 1;
  readonly #start: () => IsolateServer;
  /** Whether the child is kept started between calls (`warmSpare`). */
  readonly #eager: boolean;
  #server: IsolateServer | undefined;

  constructor(eager: boolean, start: () => IsolateServer) {
    this.#eager = eager;
    this.#start = start;
  }

  get needsFill(): boolean {
    return this.#eager && this.#server?.alive !== true;
  }

  /** The child in service, started now if there is none; throws when it cannot start. */
  take(_limits: ParserLimits): IsolateServer {
    if (this.#server?.alive !== true) this.#server = this.#start();
    return this.#server;
  }

  fill(): void {
    if (this.needsFill) this.#server = this.#start();
  }

  async ready(): Promise<void> {
    if (this.#server?.alive === true) await this.#server.ready;
  }

  discardAll(): void {
    this.#server?.retire();
    this.#server = undefined;
  }
}
