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
// Loaded and compiled before it says it is ready: a strip's time is then the strip's alone.
stripTypeScriptTypes('let ready: boolean = true', { mode: 'strip' });
parentPort.postMessage({ ready: true });
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

/** A strip's answer with the time the strip itself took, from a ready thread to its answer. */
export type TimedStrip = (StripAnswer | StripEnded) & { stripMs: number };

/** What a strip waits for and may be stopped by. */
export interface StripBounds {
  /** Milliseconds the strip may take on a ready thread; past them its thread is ended. */
  deadlineMs: number;
  /** Ends the strip (and its thread) when it aborts, whether or not it has started. */
  signal?: AbortSignal | undefined;
}

interface Pending {
  source: string;
  settle: (answer: StripAnswer) => void;
  /** Whether it already ran once on a thread that broke: a second break is its own doing. */
  retried: boolean;
}

/** A stripper thread and whether it has loaded the stripper (false: it died first). */
interface Thread {
  readonly worker: Worker;
  readonly ready: Promise<boolean>;
}

/**
 * The stripper's threads, each serving one strip at a time. Found by an attack review: the
 * stripper's time grows by about 2× per level of some nestings (`(<T>(` 22 deep, 130 bytes: 5 s;
 * 30 deep would take hours), and one thread served every strip of its process in turn, with no
 * bound: such a snippet outlived its `timeoutMs` (in-process: 22 s under 1 s) and held up every
 * other execution's TypeScript behind it (22 s). Now a strip that outlives its deadline, or whose
 * execution is cancelled, ends its thread; and a strip never waits behind another: a busy thread
 * makes the next strip start one more (at most one per strip in flight, so no more than the
 * executions running), and one idle thread is kept for the next. The deadline counts from when a
 * ready thread takes the strip: starting a thread (40–50 ms, the host's cost) is not the input's
 * (a review found small TypeScript ending TIMEOUT at `timeoutMs` 30–150 when it was counted).
 */
class StripperThreads {
  readonly #idle: Worker[] = [];

  strip(source: string, bounds: StripBounds): Promise<TimedStrip> {
    const { promise, resolve } = Promise.withResolvers<TimedStrip>();
    let current: Worker | undefined;
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    let postedAt: number | undefined;
    const finish = (answer: StripAnswer | StripEnded): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      bounds.signal?.removeEventListener('abort', onAbort);
      resolve({ ...answer, stripMs: postedAt === undefined ? 0 : performance.now() - postedAt });
    };
    // Ended from here, the thread is ended too: its stripper may be anywhere in the strip.
    const stop = (ended: StripEnded): void => {
      if (!settled && current !== undefined) void current.terminate();
      finish(ended);
    };
    const onAbort = (): void => stop({ ended: 'cancelled' });
    const request: Pending = { source, retried: false, settle: finish };
    const send = (): void => {
      if (settled) return;
      let thread: Thread;
      try {
        thread = this.#take();
      } catch {
        // No thread could start (out of memory or threads): the strip fails, nothing waits.
        finish(stripperFailed);
        return;
      }
      current = thread.worker;
      void thread.ready.then((ready) => {
        if (settled) return;
        if (!ready) return this.#broken(request, send);
        postedAt ??= performance.now();
        timer ??= setTimeout(() => stop({ ended: 'timeout' }), Math.max(0, bounds.deadlineMs));
        this.#run(thread.worker, request, send);
      });
    };
    if (bounds.signal?.aborted) onAbort();
    else {
      bounds.signal?.addEventListener('abort', onAbort, { once: true });
      send();
    }
    return promise;
  }

  /** An idle (ready) thread, or a new one when all are busy. */
  #take(): Thread {
    const idle = this.#idle.pop();
    if (idle !== undefined) {
      idle.ref();
      return { worker: idle, ready: Promise.resolve(true) };
    }
    const worker = new Worker(threadSource, { eval: true });
    const ready = new Promise<boolean>((resolve) => {
      worker.once('message', () => resolve(true));
      worker.once('error', () => resolve(false));
      worker.once('exit', () => resolve(false));
    });
    return { worker, ready };
  }

  /** A thread broke under `request`: once more on a fresh one, unless it already broke one. */
  #broken(request: Pending, again: () => void): void {
    if (request.retried) request.settle(stripperFailed);
    else {
      request.retried = true;
      again();
    }
  }

  /** Runs one strip on a ready `worker`; `again` sends it to a fresh thread after a break. */
  #run(worker: Worker, request: Pending, again: () => void): void {
    const done = (): void => {
      worker.removeAllListeners('message');
      worker.removeAllListeners('error');
      worker.removeAllListeners('exit');
    };
    // A thread that died without answering (not expected, or ended past its deadline).
    const died = (): void => {
      done();
      void worker.terminate();
      this.#broken(request, again);
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
      this.#broken(request, again);
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
 * (and the thread) `bounds.deadlineMs` after a ready thread took it or when `bounds.signal`
 * aborts; the answer says how long the strip itself took.
 */
export function stripInThread(source: string, bounds: StripBounds): Promise<TimedStrip> {
  return threads.strip(source, bounds);
}
