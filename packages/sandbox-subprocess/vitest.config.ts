import { configDefaults, defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.ts';

/**
 * Files that need the machine to themselves, with why: they run after the others, one at a time.
 * - per-uid-counts: a run takes every inotify instance, message-queue byte and queued signal its
 *   uid may have (root's too, through the user namespace), which would starve the runs of files
 *   beside it.
 * - pty-pool: a run takes every pseudo-terminal the machine's sandboxes share (a host-wide pool,
 *   whatever the uid), so a run beside it could not open one.
 * - attack-prestart: makes a default masked path (/etc/credstore) appear on the host, which
 *   every pre-started sandbox on the machine reads as a changed view and answers with a cold run
 *   (as it must): prestarted.test.ts beside it saw its spawns start cold.
 */
const alone = [
  'test/per-uid-counts.test.ts',
  'test/pty-pool.test.ts',
  'test/attack-prestart.test.ts',
];

// The rest two files at once, where vitest would run one on a 2-core machine: most of this suite
// waits (on bubblewrap's start, a child's timeout, a proxy's handshake bound), so a second file
// fills the wait. Its bounds are written for a loaded machine; ~90 s instead of ~155 s.
export default defineConfig({
  test: {
    projects: [
      {
        ...sharedTestConfig,
        test: {
          ...sharedTestConfig.test,
          name: 'shared',
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
          include: alone,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
