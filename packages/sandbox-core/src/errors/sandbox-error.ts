// The base class of every error this project raises, and the cross-realm check for it.
import type { JsonObject } from '../json-value.ts';
import type { SandboxErrorCode } from './codes.ts';
import { isSandboxErrorCode } from './codes.ts';

/**
 * Brand set on every {@link SandboxError}. `Symbol.for` keys live in the registry shared by all
 * realms of an agent, so the brand is visible on errors made in another realm (a `node:vm`
 * context, another copy of this package) where `instanceof` fails.
 */
const sandboxErrorBrand: unique symbol = Symbol.for('@coda/sandbox-core/SandboxError') as never;

/** Options accepted by every {@link SandboxError} constructor. */
export interface SandboxErrorOptions {
  /** The error that caused this one (kept on `error.cause`). */
  cause?: unknown;
  /** Figures a caller needs to act on the error (the limit, the size, the retry delay). */
  details?: JsonObject;
}

/**
 * Base class of every error raised by a Coda Sandbox layer. Switch on `code`, not on the class:
 * codes are stable across realms, package copies and the wire (see {@link SandboxErrorJSON}).
 */
export class SandboxError extends Error {
  /** What kind of failure this is; see {@link SandboxErrorCode}. */
  readonly code: SandboxErrorCode;
  /** Figures that explain the failure, safe to serialise (JSON only). */
  readonly details: JsonObject | undefined;
  /** The cross-realm brand {@link isSandboxError} checks; not enumerable. */
  declare readonly [sandboxErrorBrand]: true;

  constructor(code: SandboxErrorCode, message: string, options: SandboxErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SandboxError';
    this.code = code;
    this.details = options.details;
    Object.defineProperty(this, sandboxErrorBrand, { value: true });
  }

  /** The plain-JSON form used in `error` events and on the wire; `JSON.stringify` calls it. */
  toJSON(): SandboxErrorJSON {
    const json: SandboxErrorJSON = { name: this.name, code: this.code, message: this.message };
    if (this.details !== undefined) json.details = this.details;
    return json;
  }
}

/** The plain-JSON form of a {@link SandboxError}; {@link sandboxErrorFromJSON} turns it back. */
export interface SandboxErrorJSON {
  /** The class name (`SandboxTimeoutError`); informative only, switch on `code`. */
  name: string;
  /** What kind of failure this is; see {@link SandboxErrorCode}. */
  code: SandboxErrorCode;
  /** What happened, in words. */
  message: string;
  /** Figures that explain the failure (the limit, the size, the retry delay). */
  details?: JsonObject;
}

/**
 * Whether `value` is a {@link SandboxError}, also when it was created in another realm or by
 * another copy of this package (where `instanceof` would say no).
 */
export function isSandboxError(value: unknown): value is SandboxError {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as { [sandboxErrorBrand]?: unknown; code?: unknown };
  return candidate[sandboxErrorBrand] === true && isSandboxErrorCode(candidate.code);
}
