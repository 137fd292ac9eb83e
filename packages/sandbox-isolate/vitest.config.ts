import { defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.ts';

// isolated-vm needs --no-node-snapshot in every process that loads it (in-process tests load it
// in the test worker itself); NODE_OPTIONS does not accept the flag, so the forks pool passes it.
export default defineConfig({
  ...sharedTestConfig,
  test: {
    ...sharedTestConfig.test,
    execArgv: ['--no-node-snapshot'],
  },
});
