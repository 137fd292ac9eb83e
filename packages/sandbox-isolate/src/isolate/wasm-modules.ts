// Loads the WASM modules of SandboxEngineConfig.wasmModules from disk once per process.
import { accessSync, constants, readFileSync } from 'node:fs';
import { SandboxValidationError, type ValidationIssue } from '@coda/sandbox-core';

/** A WASM module made available to user code as the global `name`. */
export interface WasmModuleConfig {
  /** Global name user code reaches the module by (a JavaScript identifier). */
  name: string;
  /** Path of the `.wasm` binary, read once when the engine (or its worker) starts. */
  wasmPath: string;
  /**
   * Path of a trusted JavaScript file run inside each isolate as a function body with the
   * parameters `wasmModule` (the compiled `WebAssembly.Module`) and `WebAssembly`; its return value
   * becomes the global. Without it the global is the module instance's `exports`.
   */
  jsBindingPath?: string | undefined;
}

/** A WASM module read into memory: name, bytes and binding source. */
export interface LoadedWasmModule {
  /** The global name user code sees it under. */
  name: string;
  /** The `.wasm` file's bytes. */
  bytes: Uint8Array;
  /** The binding file's source, or null when there is none. */
  binding: string | null;
}

/** Reads every configured module; throws (with the path) when a file cannot be read. */
export function loadWasmModules(modules: readonly WasmModuleConfig[]): LoadedWasmModule[] {
  return modules.map((module) => ({
    name: module.name,
    bytes: new Uint8Array(readFileSync(module.wasmPath)),
    binding: module.jsBindingPath === undefined ? null : readFileSync(module.jsBindingPath, 'utf8'),
  }));
}

/** Throws one SandboxValidationError naming every module file that cannot be read. */
export function checkWasmModules(modules: readonly WasmModuleConfig[]): void {
  const issues: ValidationIssue[] = [];
  modules.forEach((module, index) => {
    for (const key of ['wasmPath', 'jsBindingPath'] as const) {
      const path = module[key];
      if (path === undefined) continue;
      try {
        accessSync(path, constants.R_OK);
      } catch (error) {
        const code = (error as { code?: string }).code ?? 'unreadable';
        issues.push({
          path: `wasmModules.${index}.${key}`,
          message: `cannot be read (${code})`,
          received: path,
        });
      }
    }
  });
  if (issues.length === 0) return;
  const list = issues.map((issue) => `${issue.path}: ${issue.message}`).join('; ');
  throw new SandboxValidationError(`Invalid SandboxEngine config: ${list}`, { issues });
}
