// Starts a worker process: the script, Node's flags, and what it inherits from the host (nothing).
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const moduleUrl = import.meta.url;
const fromSource = moduleUrl.endsWith('.ts');
const workerScript = fileURLToPath(new URL(`./worker-main.${fromSource ? 'ts' : 'js'}`, moduleUrl));
// isolated-vm needs --no-node-snapshot on Node ≥ 20. Running from sources, Node strips the
// types itself and the source condition resolves workspace packages to their sources too.
const workerExecArgv = [
  '--no-node-snapshot',
  '--disable-warning=ExperimentalWarning',
  ...(fromSource ? ['--conditions=@coda/source'] : []),
];

/** Forks a worker process (JSON over IPC, stderr piped for the host to read why it died). */
export function forkWorker(): ChildProcess {
  // The worker needs nothing from the host's environment, so it gets none of its secrets.
  return fork(workerScript, [], {
    execArgv: workerExecArgv,
    env: {},
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    serialization: 'json',
  });
}
