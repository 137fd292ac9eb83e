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
parentPort.on('message', ({ id, source }) => {
  try {
    parentPort.postMessage({ id, ok: true, code: stripTypeScriptTypes(source, { mode: 'strip' }) });
  } catch (error) {
    const message = error instanceof Error ? String(error.message) : String(error);
    const stack = error instanceof Error && typeof error.stack === 'string' ? error.stack : '';
    const code = error !== null && typeof error === 'object' && typeof error.code === 'string' ? error.code : undefined;
    parentPort.postMessage({ id, ok: false, message, stack, code });
  }
});
`;

interface Pending {
  source: string;
  resolve: (answer: StripAnswer) => void;
  /** Whether it already ran once on a thread that broke: a second break is its own doing. */
  retried: boolean;
}

/** One stripper thread, replaced after a failure that may have broken it. */
class StripperThread {
  #worker: Worker | undefined;
  readonly #pending = new Map<number, Pending>();
  #nextId = 0;

  strip(source: string): Promise<StripAnswer> {
    return new Promise((resolve) => this.#send({ source, resolve, retried: false }));
  }

  #send(request: Pending): void {
    const id = this.#nextId++;
    this.#pending.set(id, request);
    const worker = this.#thread();
    // Only a stripper with work keeps its process alive.
    worker.ref();
    worker.postMessage({ id, source: request.source });
  }

  #done(id: number, worker: Worker): Pending | undefined {
    const request = this.#pending.get(id);
    this.#pending.delete(id);
    if (this.#pending.size === 0) worker.unref();
    return request;
  }

  #thread(): Worker {
    if (this.#worker !== undefined) return this.#worker;
    const worker = new Worker(threadSource, { eval: true });
    worker.on('message', (answer: StripAnswer & { id: number }) => this.#answer(worker, answer));
    // A thread that died without answering (not expected): each request owed gets one more try.
    worker.on('error', () => this.#broken(worker, true));
    worker.on('exit', () => this.#broken(worker, true));
    this.#worker = worker;
    return worker;
  }

  #answer(worker: Worker, answer: StripAnswer & { id: number }): void {
    if (worker !== this.#worker) return;
    const request = this.#pending.get(answer.id);
    if (request === undefined) return;
    if (answer.ok || typeScriptErrorCodes.has(answer.code ?? '')) {
      this.#done(answer.id, worker);
      request.resolve(answer.ok ? { ok: true, code: answer.code } : { ...answer });
      return;
    }
    if (request.retried) {
      this.#done(answer.id, worker);
      request.resolve(stripperFailed);
    }
    // A failure that may have broken the stripper: this request goes again, once, to a fresh
    // thread (a second such failure is its own doing); the others owed go again as they were.
    else request.retried = true;
    this.#broken(worker, false);
  }

  /** Ends `worker` and sends what it still owed to a fresh thread. */
  #broken(worker: Worker, died: boolean): void {
    if (worker !== this.#worker) return;
    this.#worker = undefined;
    void worker.terminate();
    const owed = [...this.#pending.values()];
    this.#pending.clear();
    for (const request of owed) {
      if (died && request.retried) {
        request.resolve(stripperFailed);
        continue;
      }
      if (died) request.retried = true;
      this.#send(request);
    }
  }
}

const thread = new StripperThread();

/** Runs Node's `stripTypeScriptTypes(source, { mode: 'strip' })` in the stripper thread. */
export function stripInThread(source: string): Promise<StripAnswer> {
  return thread.strip(source);
}
