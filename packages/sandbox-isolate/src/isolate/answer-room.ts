// Whether a data answer can be copied into an isolate: a big string that does not fit fails
// inside V8's copy and aborts the whole process (the worker, or in-process the host), so it is
// refused before it is copied. Big answers in flight at once are checked one after another:
// checked side by side, each against a heap reading that included none of the others, twenty
// answers of 1 M characters that each fit on their own aborted the process together (found by
// the issue 23 attack review).
import type ivm from 'isolated-vm';

/**
 * Answers shorter than this are copied in without asking for the heap's figures (a hand-off to
 * the isolate's thread): a small copy that does not fit ends at isolated-vm's memory limit like
 * any allocation, while a big one failed inside V8's copy and aborted the whole process.
 */
const answerCheckUnits = 256 * 1024;
/** Matches a string V8 cannot store one byte per unit. */
const twoByte = /[\u0100-\uffff]/;

/** Hands a granted answer over; see {@link AnswerRoom.grant}. */
export type HandOver = () => void;

/**
 * The heap room of one execution's isolate, granted to one big answer at a time: each is checked
 * against a heap reading taken after the one before it was copied in and parsed (user code's
 * `JSON.parse` of an answer can take more than its copy), so no two are granted the same room.
 */
export class AnswerRoom {
  readonly #isolate: ivm.Isolate;
  readonly #memoryMb: number;
  /** Settles once the answer granted last was handed to isolated-vm (or refused). */
  #previous: Promise<void> = Promise.resolve();

  constructor(isolate: ivm.Isolate, memoryMb: number) {
    this.#isolate = isolate;
    this.#memoryMb = memoryMb;
  }

  /**
   * Whether `json` can be copied in: it needs a byte per UTF-16 unit (two when any unit is past
   * Latin-1) of what the heap and external memory leave below the isolate's memory limit. Read while user code waits for this
   * answer, so the isolate's lock is free. Returns `undefined` when it does not fit, else a
   * function the caller must call once it returned the answer to isolated-vm.
   */
  async grant(json: string): Promise<HandOver | undefined> {
    if (json.length < answerCheckUnits) return noHandOver;
    const previous = this.#previous;
    let settle: () => void = noHandOver;
    this.#previous = new Promise((resolve) => {
      settle = resolve;
    });
    // isolated-vm queues the copy of an answer on the isolate's thread as it is returned, and
    // user code parses it in the same task: a reading started a turn later comes after both.
    const handOver = () => setImmediate(settle);
    await previous;
    try {
      const heap = await this.#isolate.getHeapStatistics();
      // isolated-vm's memoryLimit counts the heap and external memory (a copied string is
      // external) together, below V8's own heap_size_limit: past it, the copy aborted.
      const limit = Math.min(heap.heap_size_limit, this.#memoryMb * 1_048_576);
      const room = limit - heap.used_heap_size - heap.externally_allocated_size;
      if ((twoByte.test(json) ? 2 : 1) * json.length <= room) return handOver;
    } catch {
      // Disposed meanwhile: the execution is ending anyway; nothing is copied into it.
    }
    settle();
    return undefined;
  }
}

function noHandOver(): void {}
