// Node's type stripper (amaro: swc compiled to WebAssembly) runs in a worker thread of its own.
// Found by our attack review: nesting a few thousand levels deep (`(((…1…)))`, `!!!…`, `a: a: …`,
// `typeof typeof …`; 10 KB of TypeScript is enough) overflows the WebAssembly stack into the
// stripper's own memory, and every later call in that thread fails with "memory access out of
// bounds": one snippet broke TypeScript input for every later execution of its worker process
// (of the host, in `in-process` mode). A thread has its own instance of the stripper, so a thread
// whose stripper failed with anything but a TypeScript error is ended and the next call starts a
// fresh one. Never on the calling thread, not even until a first break: that thread's stripper is
// the one Node uses to load `.ts` modules of the host (about 25 MiB saved would not be worth it).
import { Worker } from 'node:worker_threads';

/** The stripper's answer: the JavaScript, or the error it threw (message, stack, Node's code). */
export type StripAnswer =
  | { ok: true; code: string }
  | { ok: false; message: string; stack: string; code: string | undefined };

/** Node's codes of TypeScript the stripper refused; any other failure may have broken it. */
const typeScriptErrorCodes = new Set([
  'ERR_INVALID_TYPESCRIPT_SYNTAX',
  'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX',
]);

/** The answer of TypeScript that broke the stripper twice (Node's own words say "a bug in Node"). */
const stripperFailed: StripAnswer = {
  ok: false,
  message:
    "TypeScript could not be stripped: Node's type stripper failed on it (code nested too deeply, or a syntax error on a very long line)",
  stack: '',
  code: undefined,
};

// CommonJS, evaluated by the thread: no file to find next to either src/ or dist/. The thread
// warns nowhere: the stripper's "experimental" warning would repeat with every fresh thread.
const threadSource = `
const { parentPort } = require('node:worker_threads');
const { stripTypeScriptTypes } = require('node:module');
process.emitWarning = () => {};
parentPort.on('message', ({ source }) => {
  try {
    parentPort.postMessage({ ok: true, code: stripTypeScriptTypes(source, { mode: 'strip' }) });
  } catch (error) {
    const message = error instanceof Error ? String(error.message) : String(error);
    const stack = error instanceof Error && typeof error.stack === 'string' ? error.stack : '';
    const code = error !== null && typeof error === 'object' && typeof error.code === 'string' ? error.code : undefined;
    parentPort.postMessage({ ok: false, message, stack, code });
  }
});
`;

/** How a strip ended that got no answer: past its deadline, or cancelled by its caller. */
export type StripEnded = { ended: 'timeout' } | { ended: 'cancelled' };

/** What a strip waits for and may be stopped by. */
export interface StripBounds {
  /** Milliseconds the strip may take; past them its thread is ended. */
  deadlineMs: number;
  /** Ends the strip (and its thread) when it aborts. */
  signal?: AbortSignal | undefined;
}

interface Pending {
  source: string;
  settle: (answer: StripAnswer | StripEnded) => void;
  /** Whether it already ran once on a thread that broke: a second break is its own doing. */
  retried: boolean;
}

/**
 * The stripper's threads, each serving one strip at a time. Found by an attack review: the
 * stripper's time grows by about 2× per level of some nestings (`(<T>(` 22 deep, 130 bytes: 5 s;
 * 30 deep would take hours), and one thread served every strip of its process in turn, with no
 * bound: such a snippet outlived its `timeoutMs` (in-process: 22 s under 1 s) and held up every
 * other execution's TypeScript behind it (22 s). Now a strip that outlives its deadline, or whose
 * execution is cancelled, ends its thread; and a strip never waits behind another: a busy thread
 * makes the next strip start one more (at most one per strip in flight, so no more than the
 * executions running), and one idle thread is kept for the next.
 */
class StripperThreads {
  readonly #idle: Worker[] = [];

  strip(source: string, bounds: StripBounds): Promise<StripAnswer | StripEnded> {
    const { promise, resolve } = Promise.withResolvers<StripAnswer | StripEnded>();
    let current: Worker | undefined;
    let settled = false;
    const finish = (answer: StripAnswer | StripEnded): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      bounds.signal?.removeEventListener('abort', onAbort);
      resolve(answer);
    };
    // Ended from here, the thread is ended too: its stripper may be anywhere in the strip.
    const stop = (ended: StripEnded): void => {
      if (!settled && current !== undefined) void current.terminate();
      finish(ended);
    };
    const onAbort = (): void => stop({ ended: 'cancelled' });
    const timer = setTimeout(() => stop({ ended: 'timeout' }), Math.max(0, bounds.deadlineMs));
    const request: Pending = { source, retried: false, settle: finish };
    const send = (): void => {
      if (settled) return;
      current = this.#take();
      this.#run(current, request, send);
    };
    if (bounds.signal?.aborted) onAbort();
    else {
      bounds.signal?.addEventListener('abort', onAbort, { once: true });
      send();
    }
    return promise;
  }

  /** An idle thread, or a new one when all are busy. */
  #take(): Worker {
    const worker = this.#idle.pop() ?? new Worker(threadSource, { eval: true });
    // Only a thread with work keeps its process alive.
    worker.ref();
    return worker;
  }

  /** Runs one strip on `worker`; `again` sends it to a fresh thread after a break. */
  #run(worker: Worker, request: Pending, again: () => void): void {
    const done = (): void => {
      worker.removeAllListeners('message');
      worker.removeAllListeners('error');
      worker.removeAllListeners('exit');
    };
    // A thread that died without answering (not expected, or ended past its deadline): one more
    // try on a fresh thread, unless this strip already broke one.
    const died = (): void => {
      done();
      void worker.terminate();
      if (request.retried) request.settle(stripperFailed);
      else {
        request.retried = true;
        again();
      }
    };
    worker.on('error', died);
    worker.on('exit', died);
    worker.on('message', (answer: StripAnswer) => {
      done();
      if (answer.ok || typeScriptErrorCodes.has(answer.code ?? '')) {
        this.#release(worker);
        request.settle(answer.ok ? { ok: true, code: answer.code } : { ...answer });
        return;
      }
      // A failure that may have broken the stripper: the thread is ended, and this strip goes
      // again, once, to a fresh one (a second such failure is its own doing).
      void worker.terminate();
      if (request.retried) request.settle(stripperFailed);
      else {
        request.retried = true;
        again();
      }
    });
    worker.postMessage({ source: request.source });
  }

  /** Keeps one idle thread for the next strip; ends the others. */
  #release(worker: Worker): void {
    if (this.#idle.length > 0) {
      void worker.terminate();
      return;
    }
    worker.unref();
    this.#idle.push(worker);
    // An idle thread that dies is not handed out again (its strips would wait for nothing).
    worker.once('exit', () => {
      const at = this.#idle.indexOf(worker);
      if (at >= 0) this.#idle.splice(at, 1);
    });
  }
}

const threads = new StripperThreads();

/**
 * Runs Node's `stripTypeScriptTypes(source, { mode: 'strip' })` in a stripper thread, ending it
 * (and the thread) past `bounds.deadlineMs` or when `bounds.signal` aborts.
 */
export function stripInThread(
  source: string,
  bounds: StripBounds,
): Promise<StripAnswer | StripEnded> {
  return threads.strip(source, bounds);
}
