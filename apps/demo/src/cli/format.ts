// Small formatters shared by the parts' terminal output.
import type { ExecutionStats, TerminalEvent } from '@coda/sandbox-core';

/** `85 ms`, `1.2 s`, `60 min`. */
export function formatMs(ms: number): string {
  if (ms >= 120_000) return `${Math.round(ms / 60_000)} min`;
  return ms >= 1_000 ? `${(ms / 1_000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

/** `12.3 KiB` style sizes. */
export function formatBytes(bytes: number): string {
  if (bytes < 1_024) return `${bytes} B`;
  if (bytes < 1_048_576) return `${(bytes / 1_024).toFixed(1)} KiB`;
  return `${(bytes / 1_048_576).toFixed(1)} MiB`;
}

/** Cuts `text` to `max` characters with an ellipsis, on one line. */
export function truncate(text: string, max = 100): string {
  const line = text.replace(/\s+/g, ' ');
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** One line of stats: the figures a reader of a run wants first. */
export function formatStats(stats: ExecutionStats | undefined): string {
  if (stats === undefined) return 'no stats (refused before it ran)';
  return [
    `wall ${formatMs(stats.wallMs)}`,
    `cpu ${formatMs(stats.cpuMs)}`,
    `heap ${formatBytes(stats.heapUsedBytes)}`,
    `data ${stats.dataRequests} req / ${formatBytes(stats.dataBytes)}`,
    `status ${stats.statusEvents}${stats.statusDropped > 0 ? ` (+${stats.statusDropped} dropped)` : ''}`,
    `result ${formatBytes(stats.resultBytes)}`,
  ].join(' · ');
}

/** `result` or the error code, for tables. */
export function outcomeOf(event: TerminalEvent): string {
  return event.type === 'result' ? 'result' : event.code;
}
