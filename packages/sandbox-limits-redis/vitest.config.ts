import { defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.ts';

export default defineConfig({
  ...sharedTestConfig,
  test: {
    ...sharedTestConfig.test,
    // One standalone server and one cluster for every test file, started once.
    globalSetup: ['test/global-setup.ts'],
  },
});
