import { defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.ts';

// isolated-vm wants --no-node-snapshot in every process that loads it; NODE_OPTIONS does not
// accept the flag, so the forks pool passes it. The CLI test starts its own process with it.
export default defineConfig({
  ...sharedTestConfig,
  test: {
    ...sharedTestConfig.test,
    execArgv: ['--no-node-snapshot'],
    // One redis-server for every test file: the limits of the API and page tests live in it.
    globalSetup: ['test/global-setup.ts'],
  },
});
