import { defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.ts';

export default defineConfig({
  ...sharedTestConfig,
  test: {
    ...sharedTestConfig.test,
    // A real redis-server for every file, started once.
    globalSetup: ['src/support/global-setup.ts'],
    // isolated-vm needs --no-node-snapshot in any process that loads it; the engine's worker
    // processes get it themselves, this covers a test that loads isolated-vm in the test process.
    // --expose-gc lets the soak measure resident memory after a collection.
    execArgv: ['--no-node-snapshot', '--expose-gc'],
    // Two files at a time on a 2-core machine: the soak and the timing bounds stay meaningful.
    maxWorkers: 2,
  },
});
