import { describe, expect, it } from 'vitest';
import { docComment, type JsonSchema, renderType } from './json-schema-to-typescript.ts';

const noRefs = { name: () => undefined };

describe('renderType', () => {
  it.each<[JsonSchema, string]>([
    [true, 'unknown'],
    [false, 'never'],
    [{}, 'unknown'],
    [{ type: ['string', 'null'] }, 'string | null'],
    [{ type: 'integer' }, 'number'],
    [{ const: 'a' }, '"a"'],
    [{ enum: ['a', 1, null] }, '"a" | 1 | null'],
    [
      { anyOf: [{ type: 'string' }, { anyOf: [{ type: 'number' }, { type: 'null' }] }] },
      'string | number | null',
    ],
    [{ anyOf: [{ type: 'string' }, {}] }, 'unknown'],
    [
      { allOf: [{ anyOf: [{ type: 'string' }, { type: 'number' }] }, { const: 1 }] },
      '(string | number) & 1',
    ],
    [{ type: 'array', items: { enum: ['a', 'b'] } }, '("a" | "b")[]'],
    [{ type: 'array' }, 'unknown[]'],
    [
      { type: 'array', prefixItems: [{ type: 'string' }], items: { type: 'number' } },
      '[string, ...number[]]',
    ],
    [{ type: 'object', additionalProperties: { type: 'number' } }, 'Record<string, number>'],
    [{ type: 'object' }, 'Record<string, unknown>'],
    [
      {
        type: 'object',
        properties: { a: { type: 'string' } },
        required: ['a'],
        additionalProperties: { type: 'number' },
      },
      '{\n  a: string;\n  [key: string]: number;\n}',
    ],
    [{ $ref: '#/$defs/x' }, 'unknown'],
    [{ not: { type: 'string' } }, 'unknown'],
  ])('%j → %s', (schema, expected) => {
    expect(renderType(schema, noRefs)).toBe(expected);
  });

  it('stops at 32 levels with unknown', () => {
    let schema: JsonSchema = { type: 'string' };
    for (let i = 0; i < 40; i++) schema = { type: 'array', items: schema };
    expect(renderType(schema, noRefs)).toBe(`unknown${'[]'.repeat(33)}`);
  });
});

describe('docComment', () => {
  it('keeps a description from closing its comment', () => {
    expect(docComment({ description: 'ends */ here' }, '')).toBe('/** ends *\\/ here */');
  });
});
