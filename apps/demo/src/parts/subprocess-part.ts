// Part 3: commands under a restrictive OS sandbox policy, with the controls that applied.
// TEMPORARY: pending until @coda/sandbox-subprocess exports createSandbox.
import type { DemoPart } from './part.ts';

export const subprocessPart: DemoPart = {
  name: 'subprocess',
  title: 'Subprocess sandbox',
  summary: 'Commands under a restrictive policy: no network, no writes, short time limit.',
  async run() {
    return {
      part: 'subprocess',
      status: 'pending',
      reason: 'waits for @coda/sandbox-subprocess (createSandbox)',
      attacks: [],
      runs: [],
    };
  },
};
