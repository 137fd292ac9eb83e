// The documented option types and the zod schemas that validate them must describe the same
// objects: a field added to one and not the other fails the package's typecheck (`tsc`, part of
// `pnpm test`). Fields holding data must have the same type in both. Fields holding functions
// and objects the caller brings (a data handler, tools, guards, a logger, telemetry providers,
// limits checked by core) are checked for their shape at run time; their precise type is the
// interface's, so for them only the name and whether it is optional must agree.
import { describe, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import type {
  EngineConfigSchema,
  SandboxEngineConfig,
  SubmitRequest,
  SubmitRequestSchema,
  WasmModuleSchema,
} from './config/engine-config.ts';
import type { WasmModuleConfig } from './isolate/wasm-modules.ts';
import type { McpToolsOptions, McpToolsOptionsSchema } from './mcp/tools-from-mcp-client.ts';
import type { TelemetryConfig, TelemetryConfigSchema } from './telemetry/telemetry-config.ts';

/** The keys of `T` that may be left out. */
type OptionalKeys<T> = { [Key in keyof T]-?: object extends Pick<T, Key> ? Key : never }[keyof T];

type EngineConfigInput = z.input<typeof EngineConfigSchema>;
type EngineDataFields =
  | 'maxConcurrent'
  | 'maxQueueWaitMs'
  | 'poolSize'
  | 'isolation'
  | 'workers'
  | 'workerBaseMemoryMb'
  | 'language';

type SubmitRequestInput = z.input<typeof SubmitRequestSchema>;
type SubmitDataFields = 'code' | 'signal' | 'language';

describe('option types and their schemas', () => {
  it('name the same fields, optional in both or in neither', () => {
    expectTypeOf<keyof SandboxEngineConfig>().toEqualTypeOf<keyof EngineConfigInput>();
    expectTypeOf<OptionalKeys<SandboxEngineConfig>>().toEqualTypeOf<
      OptionalKeys<EngineConfigInput>
    >();
    expectTypeOf<keyof SubmitRequest>().toEqualTypeOf<keyof SubmitRequestInput>();
    expectTypeOf<OptionalKeys<SubmitRequest>>().toEqualTypeOf<OptionalKeys<SubmitRequestInput>>();
  });

  it('agree on the type of every field that holds data', () => {
    expectTypeOf<Pick<SandboxEngineConfig, EngineDataFields>>().toEqualTypeOf<
      Pick<EngineConfigInput, EngineDataFields>
    >();
    expectTypeOf<Pick<SubmitRequest, SubmitDataFields>>().toEqualTypeOf<
      Pick<SubmitRequestInput, SubmitDataFields>
    >();
    expectTypeOf<WasmModuleConfig>().toEqualTypeOf<z.input<typeof WasmModuleSchema>>();
    expectTypeOf<WasmModuleConfig>().toEqualTypeOf<z.output<typeof WasmModuleSchema>>();
    expectTypeOf<TelemetryConfig>().toEqualTypeOf<z.input<typeof TelemetryConfigSchema>>();
    expectTypeOf<TelemetryConfig>().toEqualTypeOf<z.output<typeof TelemetryConfigSchema>>();
    expectTypeOf<McpToolsOptions>().toEqualTypeOf<z.input<typeof McpToolsOptionsSchema>>();
    expectTypeOf<McpToolsOptions>().toEqualTypeOf<z.output<typeof McpToolsOptionsSchema>>();
  });
});
