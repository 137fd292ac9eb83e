import { defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.ts';

export default defineConfig({
  ...sharedTestConfig,
  test: {
    ...sharedTestConfig.test,
    // One standalone server and one cluster for every test file, started once.
    globalSetup: ['test/global-setup.ts'],
    // Four files at once: this suite waits on Redis (failovers, restarts, refill intervals) far
    // more than it computes, and every file keys its data by a UUID of its own. ~30 s, not ~95 s.
    maxWorkers: 4,
  },
});
