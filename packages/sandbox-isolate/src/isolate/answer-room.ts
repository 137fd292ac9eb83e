// Whether a data answer can be copied into an isolate: a big copy that does not fit failed
// inside V8's copy and aborted the whole process (its co-tenants with it), so a big answer is
// copied in only after the isolate has said how much room its heap has left.

/**
 * Answers shorter than this are copied in without asking for the heap's room: a small copy that
 * does not fit ends at isolated-vm's memory limit like any allocation.
 */
export const answerCheckUnits = 256 * 1024;

/** Matches a string V8 cannot store one byte per unit. */
const twoByte = /[\u0100-\uffff]/;

/**
 * Whether `json` fits in `room` bytes of heap: a string needs a byte per UTF-16 unit, two when
 * any unit is past Latin-1.
 */
export function answerFits(json: string, room: number): boolean {
  return (twoByte.test(json) ? 2 : 1) * json.length <= room;
}
