// Entry point of a worker process: hosts isolates for the engine in the parent and relays their
// bridge calls over IPC. Any isolated-vm failure here kills this process, never the host.
import { writeSync } from 'node:fs';
import { type ExecutionLimits, sandboxErrorFromJSON, silentLogger } from '@coda/sandbox-core';
import { IsolateRuntime } from '../isolate/isolate-runtime.ts';
import type { DataAnswer, JobHost, SynchronousStart } from '../isolate/job.ts';
import { loadWasmModules } from '../isolate/wasm-modules.ts';
import { catastrophicMarker, type HostMessage, type WorkerMessage } from './protocol.ts';

const send = (message: WorkerMessage) => {
  if (process.connected) process.send?.(message);
};

let runtime: IsolateRuntime | undefined;
let defaultLimits: ExecutionLimits;
const running = new Map<string, AbortController>();
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

function hostFor(id: string): JobHost {
  return {
    status(source, level, message, dataJson) {
      const event: WorkerMessage = { t: 'status', id, source, level, message };
      if (dataJson !== undefined) event.dataJson = dataJson;
      send(event);
    },
    data(paramsJson, units, tooDeep) {
      const seq = nextSeq++;
      return new Promise<DataAnswer>((resolve) => {
        answers.set(seq, resolve);
        send({ t: 'data', id, seq, paramsJson, units, deep: tooDeep });
      });
    },
  };
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
  const job = { id: message.id, code: message.code, limits: message.limits ?? defaultLimits };
  const controller = new AbortController();
  running.set(job.id, controller);
  try {
    const start = message.here === true ? startHere(job.id) : undefined;
    const outcome = await runtimeNow.execute(job, hostFor(job.id), controller.signal, start);
    send({ t: 'done', id: job.id, outcome });
  } finally {
    running.delete(job.id);
  }
}

process.on('message', (message: HostMessage) => {
  switch (message.t) {
    case 'init': {
      defaultLimits = message.init.defaultLimits;
      try {
        runtime = new IsolateRuntime(
          { ...message.init, logger: silentLogger, onCatastrophicError },
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
