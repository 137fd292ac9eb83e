// What the host has given one execution, in order, so that an execution lost with a worker a
// co-tenant killed can run again without the caller or a handler seeing anything twice: the
// status events it delivered, the data requests and tool calls it passed on, and their answers
// at the point they reached the execution. A second run whose traffic equals the journal's gets
// the recorded answers without a handler being called again, and the recorded status events are
// not delivered again; past the journal's end it is live. See "Co-tenant survival" in
// docs/isolate.md.
import { createHash } from 'node:crypto';
import {
  type ExecutionLimits,
  SandboxCrashError,
  SandboxErrorCode,
  type SandboxErrorJSON,
  type StatusLevel,
} from '@coda/sandbox-core';
import type { DataAnswer, JobHost, JobOutcome, ParamsRefusal } from '../isolate/job.ts';

interface StatusEntry {
  kind: 'status';
  source: string;
  level: StatusLevel;
  message: Fingerprint;
  dataJson: Fingerprint;
}

interface RequestEntry {
  kind: 'request';
  paramsJson: Fingerprint;
  units: number;
  refusal: ParamsRefusal;
  tool: string | undefined;
  /** The handler's answer, once it came (the host's own promise never rejects). */
  answer: DataAnswer | undefined;
  /** The second run's same request, waiting for this answer. */
  replayed: ((answer: DataAnswer) => void) | undefined;
}

/** Where the answer of `request` reached the first run (or would have: it came after the death). */
interface AnswerEntry {
  kind: 'answer';
  request: RequestEntry;
}

type Entry = StatusEntry | RequestEntry | AnswerEntry;

/**
 * What the journal keeps of a text it only compares: the text itself when short, else its length
 * and SHA-256 — a 1 MB request kept whole would hold the host's memory for the whole execution.
 */
type Fingerprint = string | null | undefined;

/** Texts up to this many UTF-16 units are kept as they are (no hashing on the common path). */
const keptWholeUnits = 256;

/**
 * The longest refusal an answer can carry, in UTF-16 units: a handler's error message is cut at
 * 1 000 (execution-session.ts), the host's own refusals are shorter. `maxDataBytes` bounds only
 * the answers that succeed.
 */
const refusalUnits = 1_024;

function fingerprint(text: string | null | undefined): Fingerprint {
  if (text === null || text === undefined || text.length <= keptWholeUnits) return text;
  return `${text.length}:${createHash('sha256').update(text).digest('base64')}`;
}

/**
 * A {@link JobHost} in front of the execution's own host that journals what passes. Recording
 * costs a reference to strings that crossed anyway, bounded by the execution's own limits; past
 * them the journal stops (it drops what it held) and the execution can no longer run again.
 */
export class ReplayJournal implements JobHost {
  readonly #host: JobHost;
  readonly #limits: ExecutionLimits;
  #entries: Entry[] | undefined;
  #units = 0;
  #full = false;
  #replaying = false;
  /** Index of the next entry the second run must reproduce. */
  #cursor = 0;
  /**
   * Set once the second run did something else than the journal holds: the error it ends with
   * unless the host ends it first (see {@link settle}). From then on it is muted.
   */
  #diverged: SandboxErrorJSON | undefined;
  /** The second run's data requests and tool calls so far, and the answers given to it. */
  #replayRequests = 0;
  #replayAnswers = 0;

  constructor(host: JobHost, limits: ExecutionLimits) {
    this.#host = host;
    this.#limits = limits;
  }

  /** Whether the execution can run again from this journal (it stayed within its bounds). */
  get replayable(): boolean {
    return !this.#full && !this.#replaying;
  }

  /**
   * Switches to the second run: from now on traffic is checked against the journal. A second run
   * whose traffic differs from the journal's before the journal's end is muted, not stopped: its
   * status events are dropped, its next data request or tool call ends it with the journal's
   * error, and so does its own outcome ({@link settle}), while what the host imposes (its time,
   * its memory bound, its own worker's death, a cancellation) stays its outcome. Stopping it at
   * once raced what it did next: a hog stopped just before its fill ended collateral, not `OOM`.
   */
  replay(): void {
    this.#replaying = true;
    this.#deliverAnswers();
  }

  /** Passed on: the job left the host's queue. */
  dispatched(): void {
    this.#host.dispatched?.();
  }

  /** Journals and delivers a status event; on the second run, skips one the journal holds. */
  status(source: string, level: StatusLevel, message: string, dataJson: string | undefined): void {
    if (this.#replaying) {
      if (this.#diverged !== undefined) return;
      const next = this.#next();
      if (next === undefined) {
        this.#host.status(source, level, message, dataJson);
        return;
      }
      if (
        next.kind === 'status' &&
        next.source === source &&
        next.level === level &&
        next.message === fingerprint(message) &&
        next.dataJson === fingerprint(dataJson)
      ) {
        this.#cursor++;
        this.#deliverAnswers();
        return;
      }
      this.#diverge('a status event');
      return;
    }
    this.#record({
      kind: 'status',
      source,
      level,
      message: fingerprint(message),
      dataJson: fingerprint(dataJson),
    });
    this.#host.status(source, level, message, dataJson);
  }

  /**
   * Journals a request and its answer; on the second run, answers one the journal holds from
   * the journal, without asking the host again.
   */
  data(
    paramsJson: string | null,
    units: number,
    refusal: ParamsRefusal,
    tool?: string,
  ): Promise<DataAnswer> {
    if (this.#replaying) return this.#replayData(paramsJson, units, refusal, tool);
    const entry: RequestEntry = {
      kind: 'request',
      paramsJson: fingerprint(paramsJson),
      units,
      refusal,
      tool,
      answer: undefined,
      replayed: undefined,
    };
    this.#record(entry);
    return this.#ask(entry, paramsJson);
  }

  #replayData(
    paramsJson: string | null,
    units: number,
    refusal: ParamsRefusal,
    tool: string | undefined,
  ): Promise<DataAnswer> {
    this.#replayRequests++;
    // Muted: a request now would reach a handler live, or be answered from a journal the run no
    // longer follows. It ends the run, with the journal's error.
    if (this.#diverged !== undefined) return Promise.resolve(fatally(this.#diverged));
    const next = this.#next();
    if (next === undefined) return this.#host.data(paramsJson, units, refusal, tool);
    if (
      next.kind === 'request' &&
      next.paramsJson === fingerprint(paramsJson) &&
      next.units === units &&
      next.refusal === refusal &&
      next.tool === tool
    ) {
      this.#cursor++;
      // Answered when the journal reaches this answer's place: after what the first run did
      // before it arrived there, so the second run sees the answers in the same order.
      const answered = new Promise<DataAnswer>((resolve) => {
        next.replayed = resolve;
      });
      this.#deliverAnswers();
      return answered;
    }
    return Promise.resolve(
      fatally(this.#diverge(tool === undefined ? 'a data request' : 'a tool call')),
    );
  }

  /**
   * The second run's isolate waits for nothing but answers, having made `requests` requests and
   * received `answers` answers. When those are all it made and all it was given (none on its
   * way), every answer whose place it reached reached it, so what it awaits is held behind the
   * next entry, which it can no longer reproduce: before awaiting it made fewer requests, or a
   * status fewer, than the first run did. It diverged, and the answers it awaits end it. (Past the
   * journal's end it is live, and this changes nothing.) Giving it the awaited answer early
   * instead was tried and refused (stop 40, an attack on it): the handler that gave that answer
   * may have depended on the requests the first run made before it arrived, so a result built on
   * it could tell the caller an order that never happened.
   */
  idle(requests: number, answers: number): void {
    if (!this.#replaying || this.#diverged !== undefined) return;
    if (requests !== this.#replayRequests || answers !== this.#replayAnswers) return;
    const missing = this.#unreproduced();
    if (missing !== undefined) this.#diverge(missing, 'waited for answers without making');
  }

  /** Asks the host, and journals where the answer arrived. */
  async #ask(entry: RequestEntry, paramsJson: string | null): Promise<DataAnswer> {
    let answer: DataAnswer;
    try {
      answer = await this.#host.data(paramsJson, entry.units, entry.refusal, entry.tool);
    } catch {
      answer = { ok: false, message: 'Data request failed' };
    }
    entry.answer = answer;
    this.#record(
      { kind: 'answer', request: entry },
      answer.ok ? answer.json.length : answer.message.length,
    );
    // The first run's worker may be dead and a second run waiting for exactly this answer.
    if (this.#replaying) this.#deliverAnswers();
    return answer;
  }

  /**
   * The next entry the second run must reproduce, undefined past the journal's end. (An answer
   * entry is never left there: its request was matched to reach it, so it was delivered.)
   */
  #next(): Entry | undefined {
    return this.#entries?.[this.#cursor];
  }

  // Gives the second run each answer whose place the journal has reached: an answer entry comes
  // after its request's, so its request was matched when the cursor is there.
  #deliverAnswers(): void {
    const entries = this.#entries;
    if (entries === undefined || this.#diverged !== undefined) return;
    for (let entry = entries[this.#cursor]; entry?.kind === 'answer'; ) {
      const { request } = entry;
      if (request.answer === undefined || request.replayed === undefined) return;
      request.replayed(request.answer);
      this.#replayAnswers++;
      this.#cursor++;
      entry = entries[this.#cursor];
    }
  }

  /** Journals `entry`; `units`: the UTF-16 units of an answer it holds whole. */
  #record(entry: Entry, units = 0): void {
    // Diverged, the second run follows the journal no more: nothing is kept for it.
    if (this.#full || this.#diverged !== undefined) return;
    const limits = this.#limits;
    this.#units += units + 2 * keptWholeUnits;
    this.#entries ??= [];
    const entries = this.#entries;
    entries.push(entry);
    // Once the second run started, what still arrives is the first run's answers that came
    // after the death, which its session bounds. Dropping the journal then would make the second
    // run live from where it is: a handler called again, a status shown twice (found by an
    // attack on the journal, stop 39, with the bound below counting no refusals).
    if (this.#replaying) return;
    // What an execution within its limits can make cross (status beyond the caps is dropped in
    // the isolate, a data request past its limits ends the execution): beyond, nothing is kept.
    // Each entry counts as two kept texts at most, and may be a refusal; answers that succeed
    // count whole (they are replayed), at most `maxDataBytes` of them.
    const maxEntries =
      limits.maxStatusEvents + limits.maxConsoleCalls + 2 * (limits.maxDataRequests + 1);
    const maxUnits = limits.maxDataBytes + (2 * keptWholeUnits + refusalUnits) * maxEntries;
    if (entries.length > maxEntries || this.#units > maxUnits) {
      this.#full = true;
      this.#entries = undefined;
    }
  }

  /**
   * The outcome the caller gets for the second run's `outcome`. An outcome user code produced (a
   * result, its own error) after the second run diverged, or before it reproduced all the first
   * run had shown the caller and the handlers, ends with the journal's error instead: that run
   * never made a call a handler already answered, or a status the caller already saw (a tool
   * that paid, then a result saying it did not). Outcomes the host imposes (a time limit, a
   * cancellation, a limit, a death) are kept: they claim nothing about what the code showed, and
   * they are what the run did (a diverged hog that then passes its memory bound ends `OOM`).
   */
  settle(outcome: JobOutcome): JobOutcome {
    if (!this.#replaying) return outcome;
    const decidedByCode =
      outcome.kind === 'result' ||
      outcome.error.code === SandboxErrorCode.RUNTIME ||
      outcome.error.code === SandboxErrorCode.VALIDATION;
    if (!decidedByCode) return outcome;
    const missing = this.#diverged === undefined ? this.#unreproduced() : undefined;
    const error =
      missing === undefined ? this.#diverged : this.#diverge(missing, 'ended without making');
    // The muted run's own figures (its status dropped by the caps, its heap) describe what nobody
    // saw: they are not reported.
    return error === undefined
      ? outcome
      : { kind: 'error', error, stats: { ...outcome.stats, statusDropped: 0, heapUsedBytes: 0 } };
  }

  /** What the first run did that the second has not reproduced yet (answers aside). */
  #unreproduced(): string | undefined {
    const entries = this.#entries ?? [];
    for (let index = this.#cursor; index < entries.length; index++) {
      const entry = entries[index]!;
      if (entry.kind === 'status') return 'a status event';
      if (entry.kind === 'request')
        return entry.tool === undefined ? 'a data request' : 'a tool call';
    }
    return undefined;
  }

  #diverge(what: string, how = 'made'): SandboxErrorJSON {
    const entries = this.#entries ?? [];
    this.#entries = undefined;
    const differs =
      how === 'made' ? " that differs from the first run's" : ' the first run had made';
    const error = new SandboxCrashError(
      `The execution was lost with a worker process another execution killed, and ran again; the second run ${how} ${what}${differs}, so it was ended rather than show the caller or a handler something twice`,
      { details: { collateral: true, replayDiverged: true } },
    ).toJSON();
    this.#diverged = error;
    // A muted run waiting for a recorded answer gets none any more: it ends with the error. (A
    // request whose answer was delivered is settled already; resolving it again does nothing.)
    for (const entry of entries) if (entry.kind === 'request') entry.replayed?.(fatally(error));
    return error;
  }
}

/** The answer that ends the run asking with `error`. */
function fatally(error: SandboxErrorJSON): DataAnswer {
  return { ok: false, message: error.message, fatal: error };
}
