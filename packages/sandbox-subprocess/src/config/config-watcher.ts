// Applies config.json changes without a restart: watch the directory (editors replace files
// rather than write them), debounce, validate, and keep the last good policy on a bad change.
import { EventEmitter } from 'node:events';
import { type FSWatcher, watch } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { type Logger, SandboxValidationError, silentLogger } from '@coda/sandbox-core';
import type { SubprocessPolicy } from '../policy/subprocess-policy.ts';
import type { SubprocessSandbox } from '../sandbox.ts';
import { loadSandboxConfig, loosenedFields } from './config-file.ts';

/** Options of {@link watchSandboxConfig}. */
export interface ConfigWatcherOptions {
  /** Where applied changes (info), loosening changes (warn) and bad changes (error) are logged. */
  logger?: Logger;
  /** Quiet time after the last file event before the file is read (default 100 ms). */
  debounceMs?: number;
}

/** Emitted after a changed file was applied. */
export interface ConfigAppliedEvent {
  /** The policy now in force (a copy). */
  readonly policy: SubprocessPolicy;
  /** Fields that now allow more than before; also logged as a warning. */
  readonly loosened: readonly string[];
}

/** Emitted when a changed file is invalid; the previous policy stays in force. */
export interface ConfigInvalidEvent {
  /** What is wrong with the file, naming each bad field. */
  readonly error: SandboxValidationError;
}

/** Events of a {@link SandboxConfigWatcher}. */
export interface ConfigWatcherEvents {
  /** A changed file was valid and is now the policy. */
  applied: [ConfigAppliedEvent];
  /** A changed file was invalid; the previous policy stays. */
  invalid: [ConfigInvalidEvent];
}

/** Watches a config file and applies its `sandbox` key to a sandbox; see {@link watchSandboxConfig}. */
export class SandboxConfigWatcher extends EventEmitter<ConfigWatcherEvents> {
  readonly #path: string;
  readonly #sandbox: SubprocessSandbox;
  readonly #logger: Logger;
  readonly #debounceMs: number;
  #watcher: FSWatcher | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(path: string, sandbox: SubprocessSandbox, options: ConfigWatcherOptions = {}) {
    super();
    this.#path = resolve(path);
    this.#sandbox = sandbox;
    this.#logger = options.logger ?? silentLogger;
    this.#debounceMs = options.debounceMs ?? 100;
  }

  /** Loads the file now (throwing if it is invalid) and starts watching it. */
  start(): this {
    this.#sandbox.replacePolicy(loadSandboxConfig(this.#path));
    const name = basename(this.#path);
    this.#watcher = watch(dirname(this.#path), { persistent: false }, (_event, file) => {
      if (file !== null && file !== name) return;
      clearTimeout(this.#timer);
      this.#timer = setTimeout(() => this.reload(), this.#debounceMs);
    });
    this.#watcher.on('error', (error) =>
      this.#logger.error({ error }, '[Sandbox] config watcher failed'),
    );
    return this;
  }

  /** Reads the file again and applies it if valid; returns whether it was applied. */
  reload(): boolean {
    const before = this.#sandbox.getPolicy();
    let policy: SubprocessPolicy;
    try {
      policy = loadSandboxConfig(this.#path);
    } catch (error) {
      const invalid =
        error instanceof SandboxValidationError
          ? error
          : new SandboxValidationError(`Invalid config file ${this.#path}: ${String(error)}`);
      this.#logger.error(
        { path: this.#path, issues: invalid.issues },
        `[Sandbox] ${invalid.message}; keeping the last good policy`,
      );
      this.emit('invalid', { error: invalid });
      return false;
    }
    this.#sandbox.replacePolicy(policy);
    const loosened = loosenedFields(before, policy);
    if (loosened.length > 0) {
      this.#logger.warn(
        { path: this.#path, loosened },
        `[Sandbox] config change loosens the sandbox policy: ${loosened.join(', ')}`,
      );
    } else {
      this.#logger.info({ path: this.#path }, '[Sandbox] config change applied');
    }
    this.emit('applied', { policy: structuredClone(policy), loosened });
    return true;
  }

  /** Stops watching. */
  close(): void {
    clearTimeout(this.#timer);
    this.#watcher?.close();
    this.#watcher = undefined;
  }
}

/**
 * Applies the `sandbox` key of `path` (a config.json) to `sandbox` now and on every change,
 * debounced. An invalid change keeps the last good policy, is logged as an error and emitted
 * as `invalid`; a change that loosens the policy is logged as a warning. Throws
 * `SandboxValidationError` if the file is invalid at start.
 */
export function watchSandboxConfig(
  path: string,
  sandbox: SubprocessSandbox,
  options?: ConfigWatcherOptions,
): SandboxConfigWatcher {
  return new SandboxConfigWatcher(path, sandbox, options).start();
}
