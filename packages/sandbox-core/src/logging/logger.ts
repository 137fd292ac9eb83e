// The logging interface runners accept: a subset of pino's, so a pino logger fits as it is.

/** One log method: `(message)` or `(fields, message)`, as pino takes them. */
export type LogMethod = {
  (message: string): void;
  (fields: object, message?: string): void;
};

/** What runners log through; pass a pino (or compatible) logger. Nothing is logged by default. */
export interface Logger {
  /** Detail for debugging, such as each child a parser host starts. */
  debug: LogMethod;
  /** Normal events worth keeping, such as an applied config change. */
  info: LogMethod;
  /** Something degraded but still safe, such as confinement by limits only. */
  warn: LogMethod;
  /** Something failed, such as an invalid config change. */
  error: LogMethod;
}

const ignore: LogMethod = () => {};

/** A logger that drops everything: the default of every runner. */
export const silentLogger: Logger = Object.freeze({
  debug: ignore,
  info: ignore,
  warn: ignore,
  error: ignore,
});
