// Colour for the terminal: only when the stream is a TTY, never when NO_COLOR is set
// (https://no-color.org: any non-empty value), so piped output and logs stay plain text.
import { styleText } from 'node:util';

/** Text styles the demo uses; each returns the text unchanged when colour is off. */
export interface Style {
  readonly enabled: boolean;
  bold(text: string): string;
  dim(text: string): string;
  green(text: string): string;
  red(text: string): string;
  yellow(text: string): string;
  cyan(text: string): string;
}

/** Whether to colour output written to `stream` under `env`. */
export function colourEnabled(
  stream: { isTTY?: boolean },
  env: NodeJS.ProcessEnv = process.env,
): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  return stream.isTTY === true;
}

/** The styles, switched on or off once for the whole run. */
export function createStyle(enabled: boolean): Style {
  // validateStream: false because the TTY/NO_COLOR decision was taken above, once.
  const paint =
    (format: Parameters<typeof styleText>[0]) =>
    (text: string): string =>
      enabled ? styleText(format, text, { validateStream: false }) : text;
  return {
    enabled,
    bold: paint('bold'),
    dim: paint('dim'),
    green: paint('green'),
    red: paint('red'),
    yellow: paint('yellow'),
    cyan: paint('cyan'),
  };
}
