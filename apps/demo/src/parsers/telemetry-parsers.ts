// The demo's parser module: each named export is a parser the parser host can run by name
// (seed 004's `flatten_telemetry_frames` and `build_telemetry_segments`). This file runs in the
// confined child, with read access to this folder only, so it imports nothing.
//
// The parsers are written the way feed parsers usually are: correct for honest feeds, trusting
// the feed's structure. A hostile feed turns that trust into a memory bomb (a run-length count
// of a billion) or an endless loop (a `next` chain that cycles) — which is why they run in a
// child with limits rather than in the host.

/** One frame of a device's telemetry feed. */
interface Frame {
  /** Milliseconds since the epoch. */
  t: number;
  /** Readings by metric name, either plain values or run-length pairs `[value, count]`. */
  readings?: Record<string, number>;
  rle?: Record<string, [number, number][]>;
  /** Index of the next frame in the chain; absent on the last one. */
  next?: number;
}

/** A feed: a device id, its frames, and the index of the first frame of the chain. */
interface Feed {
  device: string;
  head?: number;
  frames: Frame[];
}

/** One reading of one metric at one time. */
interface Row {
  device: string;
  t: number;
  metric: string;
  value: number;
}

function asFeed(payload: unknown): Feed {
  const feed = payload as Feed;
  if (typeof feed?.device !== 'string' || !Array.isArray(feed.frames)) {
    throw new TypeError('expected a feed: { device: string, frames: Frame[] }');
  }
  return feed;
}

/** Flattens every frame's readings (plain and run-length encoded) into one row per value. */
export function flatten_telemetry_frames(payload: unknown): Row[] {
  const feed = asFeed(payload);
  const rows: Row[] = [];
  for (const frame of feed.frames) {
    for (const [metric, value] of Object.entries(frame.readings ?? {})) {
      rows.push({ device: feed.device, t: frame.t, metric, value });
    }
    // Run-length pairs expand to `count` rows, one per sample interval — as many as the feed says.
    for (const [metric, runs] of Object.entries(frame.rle ?? {})) {
      let offset = 0;
      for (const [value, count] of runs) {
        for (let i = 0; i < count; i++)
          rows.push({ device: feed.device, t: frame.t + offset++, metric, value });
      }
    }
  }
  return rows;
}

/** A stretch of frames without a gap longer than `gapMs`. */
interface Segment {
  device: string;
  start: number;
  end: number;
  frames: number;
}

/**
 * Follows the frame chain from `head` and cuts it into segments wherever two frames are more
 * than `gapMs` apart (kwargs `{ gapMs }`, default 5 000).
 */
export function build_telemetry_segments(
  payload: unknown,
  kwargs: { gapMs?: number } = {},
): Segment[] {
  const feed = asFeed(payload);
  const gapMs = kwargs.gapMs ?? 5_000;
  const segments: Segment[] = [];
  let current: Segment | undefined;
  let index: number | undefined = feed.head ?? 0;
  // Trusts the chain to end: a `next` that points backwards loops forever.
  while (index !== undefined) {
    const frame: Frame | undefined = feed.frames[index];
    if (frame === undefined) throw new RangeError(`frame ${index} does not exist`);
    if (current === undefined || frame.t - current.end > gapMs) {
      current = { device: feed.device, start: frame.t, end: frame.t, frames: 0 };
      segments.push(current);
    }
    current.end = frame.t;
    current.frames++;
    index = frame.next;
  }
  return segments;
}
