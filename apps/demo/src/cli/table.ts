// Plain-text tables whose columns line up whether or not cells carry colour codes.
import { stripVTControlCharacters } from 'node:util';

/** Lays out `rows` under `headers`, columns padded to their widest cell. */
export function formatTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
): string {
  const widths = headers.map((header, column) =>
    Math.max(visibleWidth(header), ...rows.map((row) => visibleWidth(row[column] ?? ''))),
  );
  const render = (cells: readonly string[]) =>
    cells
      .map((cell, column) => pad(cell, widths[column] ?? 0))
      .join('  ')
      .trimEnd();
  const rule = widths.map((width) => '─'.repeat(width)).join('  ');
  return [render(headers), rule, ...rows.map(render)].join('\n');
}

function visibleWidth(text: string): number {
  return stripVTControlCharacters(text).length;
}

function pad(text: string, width: number): string {
  return text + ' '.repeat(Math.max(0, width - visibleWidth(text)));
}
