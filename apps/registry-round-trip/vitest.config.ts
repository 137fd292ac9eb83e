// One long test file: a registry, a copy of the repository, a publish and an install per
// package. It runs alone (turbo runs packages one at a time) and is bounded by its own timeouts.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 240_000,
    hookTimeout: 240_000,
  },
});
