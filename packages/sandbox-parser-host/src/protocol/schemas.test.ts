import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import {
  ParserRequestSchema,
  ParserResponseSchema,
  parserRequestJsonSchema,
  parserResponseJsonSchema,
} from './schemas.ts';
import type { ParserRequest, ParserResponse, ResponseErrorKind } from './wire.ts';

const docs = join(import.meta.dirname, '../../../../docs/parser-protocol.md');

/** The fenced JSON between `<!-- NAME:start -->` and `<!-- NAME:end -->` in the protocol page. */
function documented(name: string): string | undefined {
  const text = readFileSync(docs, 'utf8');
  const pattern = new RegExp(
    `<!-- ${name}:start -->\\n\`\`\`json\\n([\\s\\S]*?)\\n\`\`\`\\n<!-- ${name}:end -->`,
  );
  return pattern.exec(text)?.[1];
}

describe('parser protocol schemas', () => {
  it('are documented in docs/parser-protocol.md exactly as generated from the zod schemas', () => {
    expect(documented('parser-request-schema')).toBe(
      JSON.stringify(parserRequestJsonSchema(), null, 2),
    );
    expect(documented('parser-response-schema')).toBe(
      JSON.stringify(parserResponseJsonSchema(), null, 2),
    );
  });

  it('describe the same shapes as the wire types the runner uses', () => {
    expectTypeOf<z.input<typeof ParserRequestSchema>>().toEqualTypeOf<ParserRequest>();
    expectTypeOf<z.output<typeof ParserResponseSchema>>().toEqualTypeOf<ParserResponse>();
    expectTypeOf<z.output<typeof ParserResponseSchema> & { ok: false }>()
      .toHaveProperty('kind')
      .toEqualTypeOf<ResponseErrorKind>();
  });

  it('accept what a runner sends and refuse every other shape', () => {
    const accepted = [
      { ok: true, data: null },
      { ok: true, data: { nested: [1, 'two'] } },
      { ok: false, error: 'boom', kind: 'parser-error' },
    ];
    for (const response of accepted) {
      expect(ParserResponseSchema.safeParse(response)).toEqual({ success: true, data: response });
    }
    const refused = [
      { ok: true },
      { ok: 'true', data: 1 },
      { ok: false, error: 'boom', kind: 'exploded' },
      { ok: false, error: 42, kind: 'parser-error' },
      { ok: false, kind: 'parser-error' },
      [true, null],
      null,
    ];
    for (const response of refused) {
      expect(ParserResponseSchema.safeParse(response).success, JSON.stringify(response)).toBe(
        false,
      );
    }
  });

  it('accept the request the host builds and refuse a wrong version or an unknown key', () => {
    const request = {
      v: 1,
      parser: 'flattenFrames',
      payload: { frames: [] },
      kwargs: { strict: true },
      limits: { timeout: 10_000, memoryBytes: 268_435_456, cpuSecs: 5, maxOutputBytes: 16_777_216 },
    };
    expect(ParserRequestSchema.safeParse(request)).toEqual({ success: true, data: request });
    expect(ParserRequestSchema.safeParse({ ...request, v: 2 }).success).toBe(false);
    expect(ParserRequestSchema.safeParse({ ...request, extra: 1 }).success).toBe(false);
    expect(ParserRequestSchema.safeParse({ ...request, parser: '' }).success).toBe(false);
  });
});
