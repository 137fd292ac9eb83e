# The demo's Python parser module: seed 004's two parsers as a Python team would have them. Its
# public functions are the parsers the host can run by name; it runs in the confined child with
# read access to this folder and the standard library only, so it imports nothing else.
#
# Like telemetry-parsers.ts, the parsers trust the feed's structure: a hostile feed turns a
# run-length count into a memory bomb and a cyclic `next` chain into an endless loop, which the
# child's limits (RLIMIT_AS, RLIMIT_CPU, the wall clock) end.


def _as_feed(payload):
    if not isinstance(payload, dict) or not isinstance(payload.get("device"), str) or not isinstance(payload.get("frames"), list):
        raise TypeError("expected a feed: { device: string, frames: Frame[] }")
    return payload


def flatten_telemetry_frames(payload):
    """Flattens every frame's readings (plain and run-length encoded) into one row per value."""
    feed = _as_feed(payload)
    rows = []
    for frame in feed["frames"]:
        for metric, value in (frame.get("readings") or {}).items():
            rows.append({"device": feed["device"], "t": frame["t"], "metric": metric, "value": value})
        # Run-length pairs expand to `count` rows, one per sample interval, as many as the feed says.
        for metric, runs in (frame.get("rle") or {}).items():
            offset = 0
            for value, count in runs:
                for _ in range(count):
                    rows.append({"device": feed["device"], "t": frame["t"] + offset, "metric": metric, "value": value})
                    offset += 1
    return rows


def build_telemetry_segments(payload, gapMs=5_000):  # noqa: N803 — the kwarg's name on the wire
    """Follows the frame chain from `head`, cut into segments at gaps longer than `gapMs`."""
    feed = _as_feed(payload)
    segments = []
    current = None
    index = feed.get("head", 0)
    # Trusts the chain to end: a `next` that points backwards loops forever.
    while index is not None:
        if not 0 <= index < len(feed["frames"]):
            raise IndexError("frame " + str(index) + " does not exist")
        frame = feed["frames"][index]
        if current is None or frame["t"] - current["end"] > gapMs:
            current = {"device": feed["device"], "start": frame["t"], "end": frame["t"], "frames": 0}
            segments.append(current)
        current["end"] = frame["t"]
        current["frames"] += 1
        index = frame.get("next")
    return segments
