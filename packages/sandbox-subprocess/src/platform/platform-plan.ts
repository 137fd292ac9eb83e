// Picks the launch plan of the platform.
import { darwinPlan, plainPlan } from '../darwin/seatbelt.ts';
import { linuxPlan } from '../linux/linux-plan.ts';
import { SandboxControl } from '../process/controls.ts';
import type { LaunchPlan, LaunchRequest } from '../process/launch-plan.ts';
import { windowsPlan } from '../win32/job-object.ts';
import type { Platform } from './platform.ts';

/** The launch plan for `request` on `platform`. */
export function platformPlan(platform: Platform, request: LaunchRequest): LaunchPlan {
  switch (platform) {
    case 'linux':
      return linuxPlan(request);
    case 'darwin':
      return darwinPlan(request);
    case 'win32':
      return windowsPlan(request);
    default:
      return plainPlan(
        request,
        [SandboxControl.cleanEnvironment],
        `no sandbox for ${process.platform}`,
      );
  }
}
