import { configDefaults, defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.ts';

/**
 * Files that need the machine to themselves, with why: they run after the others, one at a time.
 * - host-responsiveness, host-validation-bound: they measure the host's event-loop delay and RSS.
 * - engine: a trivial execution's own CPU time stays under 3 ms (3.8 ms read beside another file).
 * - attack-35-outcomes, memory*, oom-*: outcomes decided by the supervisor's memory samples at a
 *   kill; a loaded host moves a sample past the moment a row is about (beside another file the
 *   hog-and-newcomer row read CRASH { collateral, replayDiverged }, the case docs/isolate.md
 *   lists among what the memory-bound labelling cannot tell apart).
 * - deadline-after-preparation, queue-wait, main-thread-start: bounds on how long a build, a queue
 *   or a worker's main thread held an execution.
 */
const alone = [
  'test/host-responsiveness.test.ts',
  'test/host-validation-bound.test.ts',
  'test/engine.test.ts',
  'test/attack-35-outcomes.test.ts',
  'test/memory*.test.ts',
  'test/oom-*.test.ts',
  'test/deadline-after-preparation.test.ts',
  'test/queue-wait.test.ts',
  'test/main-thread-start.test.ts',
];

// isolated-vm needs --no-node-snapshot in every process that loads it (in-process tests load it
// in the test worker itself); NODE_OPTIONS does not accept the flag, so the forks pool passes it.
// The rest run two files at once, where vitest would run one on a 2-core machine: much of this
// suite waits (a timeout row's limit, a killed worker's replacement, a held data request).
export default defineConfig({
  test: {
    projects: [
      {
        ...sharedTestConfig,
        test: {
          ...sharedTestConfig.test,
          name: 'shared',
          execArgv: ['--no-node-snapshot'],
          exclude: [...configDefaults.exclude, ...alone],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        ...sharedTestConfig,
        test: {
          ...sharedTestConfig.test,
          name: 'alone',
          execArgv: ['--no-node-snapshot'],
          include: alone,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
