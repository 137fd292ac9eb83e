// Test settings every workspace package shares: run on sources through the `@coda/source`
// export condition (no build needed), in forked processes so native modules and process-wide
// limits of one file cannot disturb another.
import type { ViteUserConfig } from 'vitest/config';

export const sharedTestConfig = {
  resolve: { conditions: ['@coda/source'] },
  ssr: { resolve: { conditions: ['@coda/source'] } },
  test: {
    pool: 'forks',
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
} satisfies ViteUserConfig;
