// The Node command line of the isolate child (`processModel: 'isolate'`). The same permission
// model as a runner child (reads only of its files and the parser's, no writes, no child
// processes, no workers, no WASI, no inspector), with two differences isolated-vm needs: the
// one native addon it loads (read access to that file only, `--allow-addons`), and no startup
// snapshot (`--no-node-snapshot`, which isolated-vm requires on Node 20 and later). No
// RLIMIT_CPU: the child serves many calls; each call's CPU time is its isolate's, bounded there.
import type { IsolateServerFiles, RunnerPlan } from './node-command.ts';
import { descriptorInfoPath, heapLimitMiB } from './node-command.ts';
import { isolateRunnerPath, jsonCostPath, wirePath } from './runner-files.ts';

/** Arguments of `node` for the isolate child. */
export function isolateNodeArguments(
  plan: RunnerPlan & { isolateServer: IsolateServerFiles },
): string[] {
  return [
    '--permission',
    `--allow-fs-read=${isolateRunnerPath}`,
    `--allow-fs-read=${wirePath}`,
    `--allow-fs-read=${jsonCostPath}`,
    `--allow-fs-read=${plan.isolateServer.addonPath}`,
    ...plan.readPaths.map((path) => `--allow-fs-read=${path}`),
    ...(process.platform === 'linux' ? [`--allow-fs-read=${descriptorInfoPath}`] : []),
    '--allow-addons',
    '--no-node-snapshot',
    // The child's own heap holds the requests and answers in flight, not the isolates' heaps.
    `--max-old-space-size=${heapLimitMiB(plan.limits.memoryBytes)}`,
    '--no-experimental-sqlite',
    '--disable-sigusr1',
    '--disable-proto=delete',
    // `--allow-addons` warns on every start; the one addon is chosen by the host, not parsers.
    '--disable-warning=SecurityWarning',
    isolateRunnerPath,
    plan.modulePath ?? '',
    plan.isolateServer.addonPath,
  ];
}
