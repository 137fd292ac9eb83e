// This process's clocks, captured when the module loads: code that later replaces `Date.now`,
// `performance.now` or `performance.timeOrigin` (user code in the same process, a test spy)
// changes nothing the limits read.
const dateNow = Date.now;
const performanceNow = performance.now.bind(performance);
const timeOrigin = performance.timeOrigin;

/** This host's wall clock (`Date.now()` as it was when the package loaded), in ms since the epoch. */
export const hostWallNow = (): number => dateNow();

/**
 * This process's monotonic clock expressed in ms since the epoch (the wall time the process
 * started plus the monotonic time since): never steps, and what the memory store times by.
 */
export const monotonicNow = (): number => timeOrigin + performanceNow();
