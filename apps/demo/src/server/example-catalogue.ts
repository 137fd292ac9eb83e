// GET /v1/examples: the one-click examples and attacks the playground offers, from the CLI's own
// lists, so the page and `pnpm demo` always show the same code.
import type { ExecutionLimits, SandboxErrorCode } from '@coda/sandbox-core';
import { isolateAttacks } from '../attacks/isolate-attacks.ts';
import { examples } from '../snippets/examples.ts';

/** One entry of the catalogue. */
export interface CatalogueEntry {
  id: string;
  title: string;
  /** The body of an async function. */
  code: string;
  /** Limits the entry runs under (empty: the server's defaults). */
  limits: Partial<ExecutionLimits>;
}

/** The body of GET /v1/examples. */
export interface ExampleCatalogue {
  examples: CatalogueEntry[];
  /** Attacks of the threat model the isolate contains, and the error codes that contain each. */
  attacks: (CatalogueEntry & { containedBy: readonly SandboxErrorCode[] })[];
}

/** Builds the catalogue once, at start-up. */
export function exampleCatalogue(): ExampleCatalogue {
  return {
    examples: examples.map(({ id, title, code, limits }) => ({
      id,
      title,
      code,
      limits: limits ?? {},
    })),
    attacks: isolateAttacks
      .filter((attack) => attack.inPlayground)
      .map(({ id, attack, code, limits, containedBy }) => ({
        id,
        title: attack,
        code,
        limits: limits ?? {},
        containedBy,
      })),
  };
}
