// Entry point of a worker process: hosts isolates for the engine in the parent and relays their
// bridge calls over IPC. Any isolated-vm failure here kills this process, never the host.
import { writeSync } from 'node:fs';
import {
  type ExecutionLimits,
  measureJson,
  sandboxErrorFromJSON,
  silentLogger,
} from '@coda/sandbox-core';
import { maxJsonDepth } from '../bridge/safe-json.ts';
import { resultTooBig, resultTooDeep } from '../isolate/code-executor.ts';
import { IsolateRuntime } from '../isolate/isolate-runtime.ts';
import type {
  DataAnswer,
  ExecutionJob,
  JobHost,
  JobOutcome,
  SynchronousStart,
} from '../isolate/job.ts';
import { loadWasmModules } from '../isolate/wasm-modules.ts';
import {
  catastrophicMarker,
  type HostMessage,
  overdueAfterMs,
  type WorkerMessage,
} from './protocol.ts';

/** The longest delay `setTimeout` keeps (2³¹ − 1 ms). */
const maxTimerMs = 2_147_483_647;

const send = (message: WorkerMessage) => {
  if (process.connected) process.send?.(message);
};

let runtime: IsolateRuntime | undefined;
let defaultLimits: ExecutionLimits;
const running = new Map<string, AbortController>();
/** The jobs whose user code has started (a build on this thread does not stop theirs). */
const runningUserCode = new Set<string>();
const answers = new Map<number, (answer: DataAnswer) => void>();
let nextSeq = 0;

// isolated-vm's advice after a catastrophic error is to end the process; the thread that
// reports it may be deadlocked with V8, so write synchronously and kill without cleanup.
function onCatastrophicError(message: string): void {
  try {
    writeSync(2, `${catastrophicMarker}${message.replace(/\s+/g, ' ')}\n`);
  } finally {
    process.kill(process.pid, 'SIGKILL');
  }
}

// What the isolate hands over is measured again here before it goes to the host: this process
// is the host's trust boundary, and the host must never parse an attacker-sized document.
function hostFor(id: string, limits: ExecutionLimits): JobHost {
  return {
    status(source, level, message, dataJson) {
      const units = message.length + (dataJson?.length ?? 0);
      if (units > limits.maxStatusBytes) return; // bytes >= UTF-16 units: surely over
      const event: WorkerMessage = { t: 'status', id, source, level, message };
      if (dataJson !== undefined && measureJson(dataJson, maxJsonDepth, units + 1) === '') {
        event.dataJson = dataJson;
      }
      send(event);
    },
    data(paramsJson, units, refusal, tool) {
      const seq = nextSeq++;
      let params = paramsJson;
      let why = refusal;
      let size = units;
      if (params !== null) {
        size = Buffer.byteLength(params);
        if (size > limits.maxRequestBytes) why = 'size';
        else why = measureJson(params, maxJsonDepth, limits.maxRequestValues);
        if (why !== '') params = null;
      }
      return new Promise<DataAnswer>((resolve) => {
        answers.set(seq, resolve);
        const message: WorkerMessage = {
          t: 'data',
          id,
          seq,
          paramsJson: params,
          units: size,
          refusal: why,
        };
        if (tool !== undefined) message.tool = tool;
        send(message);
      });
    },
    idle(requests, answers) {
      send({ t: 'idle', id, requests, answers });
    },
  };
}

/** The outcome as it may leave this process: a result over its bounds becomes their error. */
function checkedOutcome(outcome: JobOutcome, limits: ExecutionLimits): JobOutcome {
  if (outcome.kind !== 'result') return outcome;
  const bytes = Buffer.byteLength(outcome.json);
  if (bytes > limits.maxResultBytes) {
    return {
      kind: 'error',
      error: resultTooBig(bytes, limits.maxResultBytes),
      stats: outcome.stats,
    };
  }
  if (measureJson(outcome.json, maxJsonDepth, bytes + 1) === 'depth') {
    return { kind: 'error', error: resultTooDeep(), stats: outcome.stats };
  }
  return outcome;
}

// The host asks for a job to start on this thread only when it has no other job for this
// worker, and sends it no other until the job yields (it holds them instead). The check as user
// code starts is a second line of defence: another job's bridge calls would need this thread.
function startHere(id: string): SynchronousStart {
  return {
    allowed: () => running.size === 1,
    yielded: () => send({ t: 'yielded', id }),
  };
}

async function run(runtimeNow: IsolateRuntime, message: Extract<HostMessage, { t: 'run' }>) {
  const job: ExecutionJob = {
    id: message.id,
    code: message.code,
    limits: message.limits ?? defaultLimits,
  };
  if (message.language === 'typescript') job.language = 'typescript';
  if (message.reportIdle === true) job.reportIdle = true;
  const controller = new AbortController();
  running.set(job.id, controller);
  // This thread is free while the isolate runs on its own (a job on this thread is alone, and
  // the host watches it itself): past its time, the job's isolate ignored termination. Armed
  // when user code's clock starts, so building the isolate or stripping TypeScript on a loaded
  // machine never counts against the job. (A delay past a timer's range would fire at once:
  // such a job gets the host's deadline.)
  const overdueMs = job.limits.timeoutMs + overdueAfterMs;
  let overdue: NodeJS.Timeout | undefined;
  const host = hostFor(job.id, job.limits);
  host.started = () => {
    runningUserCode.add(job.id);
    if (overdueMs > maxTimerMs) return;
    overdue = setTimeout(() => send({ t: 'overdue', id: job.id }), overdueMs);
    overdue.unref();
  };
  try {
    const start = message.here === true ? startHere(job.id) : undefined;
    const outcome = await runtimeNow.execute(job, host, controller.signal, start);
    send({ t: 'done', id: job.id, outcome: checkedOutcome(outcome, job.limits) });
  } finally {
    clearTimeout(overdue);
    running.delete(job.id);
    runningUserCode.delete(job.id);
  }
}

process.on('message', (message: HostMessage) => {
  switch (message.t) {
    case 'init': {
      defaultLimits = message.init.defaultLimits;
      try {
        runtime = new IsolateRuntime(
          {
            ...message.init,
            logger: silentLogger,
            onCatastrophicError,
            // A slow build blocks this thread: the host's deadlines must not count it.
            onBuild: (building) =>
              send(building ? { t: 'building', running: [...runningUserCode] } : { t: 'built' }),
          },
          loadWasmModules(message.init.wasmModules),
        );
      } catch (error) {
        send({ t: 'init-failed', message: error instanceof Error ? error.message : String(error) });
        return;
      }
      void runtime.manager.warm().then(() => send({ t: 'ready' }));
      return;
    }
    case 'run':
      if (runtime !== undefined) void run(runtime, message);
      return;
    case 'abort':
      running.get(message.id)?.abort(sandboxErrorFromJSON(message.error));
      return;
    case 'data-answer': {
      const resolve = answers.get(message.seq);
      answers.delete(message.seq);
      resolve?.(message.answer);
      return;
    }
  }
});

// Resident memory for hosts without /proc, where the parent cannot sample it itself.
setInterval(() => {
  if (running.size > 0) send({ t: 'rss', rss: process.memoryUsage.rss() });
}, 200).unref();

// The host is gone (or disconnected us): nothing left to serve. Not process.exit(): its exit
// handlers include isolated-vm's, which wait for the isolate threads, and an isolate thread in a
// synchronous call to this thread (a console call, a delivery) waits for this thread forever.
process.on('disconnect', () => process.kill(process.pid, 'SIGKILL'));

// Node ends a process on an uncaught exception through those same exit handlers: a worker whose
// host died while user code flooded console calls hung there for good (the send of a status
// line failed with EPIPE, which Node re-throws as the process's 'error' event before it reports
// the disconnect). Whatever throws here, the worker ends at once and says why on stderr.
process.on('uncaughtException', (error) => {
  onCatastrophicError(`uncaught exception in the worker: ${String(error)}`);
});
