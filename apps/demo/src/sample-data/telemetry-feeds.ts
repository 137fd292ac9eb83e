// Telemetry feeds for the parser part: one honest, two hostile. The hostile ones are valid JSON
// of the right shape; only their contents are malicious.

const start = Date.UTC(2026, 5, 1, 8, 0, 0);

/** An honest feed: 12 frames, one reading gap of a minute, one run-length encoded metric. */
export const sampleTelemetryFeed = {
  device: 'pump-7',
  head: 0,
  frames: Array.from({ length: 12 }, (_, index) => ({
    // Frames every second, with a one-minute outage after the sixth.
    t: start + index * 1_000 + (index >= 6 ? 60_000 : 0),
    readings: { temperatureC: 41 + (index % 4), rpm: 1_450 + index * 5 },
    ...(index === 0
      ? { rle: { vibration: [[0.2, 3] as [number, number], [0.4, 2] as [number, number]] } }
      : {}),
    ...(index < 11 ? { next: index + 1 } : {}),
  })),
};

/** A decompression bomb: one run-length pair that claims a billion samples. */
export const memoryBombFeed = {
  device: 'pump-evil',
  frames: [{ t: start, rle: { vibration: [[1, 1_000_000_000] as [number, number]] } }],
};

/** A chain that points back at its own start: the segment builder never reaches the end. */
export const loopingFeed = {
  device: 'pump-evil',
  head: 0,
  frames: [
    { t: start, next: 1 },
    { t: start + 1_000, next: 0 },
  ],
};
