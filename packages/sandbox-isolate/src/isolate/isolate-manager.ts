// Tier 5 and the warm pool: isolates are created ahead of time, each used by exactly one
// execution and disposed after it; the pool refills in the background.
import { type Logger, SandboxCapacityError, silentLogger } from '@coda/sandbox-core';
import { type ContextBuilder, disposeQuietly, type PreparedIsolate } from './context-builder.ts';

/** Options of an {@link IsolateManager}. */
export interface IsolateManagerOptions {
  /** Builds each isolate's context. */
  contextBuilder: ContextBuilder;
  /** Most isolates handed out at once; `acquire()` refuses beyond it (tier 5). */
  maxConcurrent: number;
  /** Warm isolates kept ready; 0 disables the pool. */
  poolSize: number;
  /** memoryLimit (MiB) of pooled isolates: requests for another limit get a fresh isolate. */
  poolMemoryMb: number;
  /** Receives refill failures. */
  logger?: Logger;
}

/**
 * Hands out single-use isolates. `acquire()` takes a warm one when the pool holds one with the
 * requested memory limit, or builds a fresh one with exactly that limit (so a request for less
 * memory than the pool's default is never given more). `release()` disposes the isolate.
 */
export class IsolateManager {
  readonly #builder: ContextBuilder;
  readonly #maxConcurrent: number;
  readonly #poolSize: number;
  readonly #poolMemoryMb: number;
  readonly #logger: Logger;
  readonly #pool: PreparedIsolate[] = [];
  readonly #active = new Set<PreparedIsolate>();
  /** Released and not yet disposed (see `release`). */
  readonly #released: PreparedIsolate[] = [];
  #reserved = 0;
  #refilling: Promise<void> | undefined;
  /** The isolate the refill is building right now (undefined if that build fails). */
  #building: Promise<PreparedIsolate | undefined> | undefined;
  /** Whether an acquirer has claimed the isolate being built. */
  #claimed = false;
  #disposed = false;

  constructor(options: IsolateManagerOptions) {
    this.#builder = options.contextBuilder;
    this.#maxConcurrent = options.maxConcurrent;
    this.#poolSize = options.poolSize;
    this.#poolMemoryMb = options.poolMemoryMb;
    this.#logger = options.logger ?? silentLogger;
  }

  /** Isolates handed out and not yet released (or being built for a caller). */
  get activeCount(): number {
    return this.#active.size + this.#reserved;
  }

  /** Warm isolates waiting in the pool. */
  get pooledCount(): number {
    return this.#pool.length;
  }

  /**
   * An isolate for one execution with a memoryLimit of `memoryMb` (the pool's default when
   * omitted). Throws `SandboxCapacityError` ("IsolateManager at capacity (N)") when `maxConcurrent`
   * isolates are out.
   */
  async acquire(memoryMb: number = this.#poolMemoryMb): Promise<PreparedIsolate> {
    if (this.#disposed) throw new SandboxCapacityError('IsolateManager is disposed');
    if (this.activeCount >= this.#maxConcurrent) {
      throw new SandboxCapacityError(`IsolateManager at capacity (${this.#maxConcurrent})`, {
        details: { maxConcurrent: this.#maxConcurrent },
      });
    }
    const index = this.#pool.findIndex((prepared) => prepared.memoryMb === memoryMb);
    let prepared: PreparedIsolate;
    if (index >= 0) {
      prepared = this.#pool.splice(index, 1)[0]!;
    } else {
      this.#reserved++;
      try {
        const claim = this.#claimRefill(memoryMb);
        prepared =
          (claim === undefined ? undefined : await claim) ??
          // Built for a caller who waits: a warm-up would only delay it.
          (await this.#builder.prepare(memoryMb, false));
      } finally {
        this.#reserved--;
      }
    }
    if (this.#disposed) {
      disposeQuietly(prepared.isolate);
      throw new SandboxCapacityError('IsolateManager is disposed');
    }
    this.#active.add(prepared);
    return prepared;
  }

  /**
   * Gives back an isolate handed out by `acquire()`: its slot is free at once, the isolate is
   * disposed a millisecond later (off the path that reports the result), or at the next
   * `disposeReleased()` if that comes first, and is
   * never handed out again; then the pool refills. Building an isolate blocks the thread for
   * about 2 ms, so refills wait until an execution has reported, never in the middle of one.
   * Never throws; safe to call twice.
   */
  release(prepared: PreparedIsolate): void {
    prepared.host = undefined;
    if (!this.#active.delete(prepared)) return;
    this.#released.push(prepared);
    // A timer, not setImmediate: the caller the result goes to (the host process, in process
    // mode) needs a CPU to wake up on, and building an isolate at once would compete with it.
    setTimeout(() => {
      this.disposeReleased();
      this.#refill();
    }, releaseDelayMs);
  }

  /**
   * Disposes the released isolates still waiting for their turn, now. Code a finished execution
   * left running (a promise callback after its result) stops with them: call this before
   * blocking the thread, which would otherwise hold off their disposal.
   */
  disposeReleased(): void {
    for (const prepared of this.#released.splice(0)) discard(prepared);
  }

  /** Resolves when the pool is full (or refilling failed). */
  async warm(): Promise<void> {
    this.#refill();
    while (this.#refilling !== undefined) await this.#refilling;
  }

  /** Disposes every pooled and active isolate; later `acquire()` calls refuse. */
  dispose(): void {
    this.#disposed = true;
    for (const prepared of this.#pool.splice(0)) discard(prepared);
    for (const prepared of this.#active) discard(prepared);
    this.#active.clear();
    this.disposeReleased();
  }

  // With the pool empty, an isolate the refill is already building is ready sooner than a new
  // one (which would also compete with it for the same thread): wait for it instead. One
  // acquirer per build; the others, and a failed build, fall back to building their own.
  #claimRefill(memoryMb: number): Promise<PreparedIsolate | undefined> | undefined {
    if (this.#building === undefined || this.#claimed) return undefined;
    if (memoryMb !== this.#poolMemoryMb) return undefined;
    this.#claimed = true;
    return this.#building;
  }

  #refill(): void {
    if (this.#refilling !== undefined || this.#disposed) return;
    if (this.#pool.length >= this.#poolSize) return;
    this.#refilling = this.#fill().finally(() => {
      this.#refilling = undefined;
    });
  }

  async #fill(): Promise<void> {
    while (!this.#disposed && this.#pool.length < this.#poolSize) {
      // One isolate per turn of the event loop, so arriving work interleaves with the refill.
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (this.#disposed) return;
      const building = this.#builder.prepare(this.#poolMemoryMb).catch((error: unknown) => {
        this.#logger.error({ err: error }, 'isolate pool refill failed');
        return undefined;
      });
      this.#building = building;
      const prepared = await building;
      this.#building = undefined;
      const claimed = this.#claimed;
      this.#claimed = false;
      if (prepared === undefined) return;
      // Claimed: the acquirer that waited for it takes it (and disposes it if we are disposed).
      if (claimed) continue;
      if (this.#disposed) disposeQuietly(prepared.isolate);
      else this.#pool.push(prepared);
    }
  }
}

/** How long after a release its isolate is disposed and the pool refilled. */
const releaseDelayMs = 1;

function discard(prepared: PreparedIsolate): void {
  try {
    prepared.run.release();
  } catch {
    // The isolate is gone already; its handles went with it.
  }
  disposeQuietly(prepared.isolate);
}
