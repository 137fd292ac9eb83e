// Loads `@opentelemetry/api`, an optional peer dependency, once and synchronously (an engine is
// built synchronously). Without it the engine makes no spans and records no metrics.
import { createRequire } from 'node:module';

/** The `@opentelemetry/api` module. */
export type OtelApi = typeof import('@opentelemetry/api');

let loaded: OtelApi | null | undefined;

/**
 * The installed `@opentelemetry/api`, or undefined when it is not installed. Its global
 * providers are shared by every copy of the API in the process (they live on `globalThis`), so
 * this copy sees what the application registered with its own.
 */
export function loadOtelApi(): OtelApi | undefined {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)('@opentelemetry/api') as OtelApi;
    } catch (error) {
      // Only "not installed" means no telemetry; a broken install is the user's to see.
      if ((error as { code?: unknown } | null)?.code !== 'MODULE_NOT_FOUND') throw error;
      loaded = null;
    }
  }
  return loaded ?? undefined;
}
