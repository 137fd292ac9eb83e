import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { it } from 'vitest';
import { makeHost } from './helpers.ts';

const module = fileURLToPath(new URL('./fixtures/isolate-attack/attacks.mjs', import.meta.url));
const mebibyte = 1024 * 1024;
const strip = (r: any) => ({ ok: r.ok, code: r.code, error: typeof r.error === 'string' ? r.error.slice(0, 120) : r.error, ms: Math.round(r.durationMs) });

it('parallel', async () => {
  for (const parser of (process.env.ATTACK ?? 'heapBomb,holdBuffers,hugeResult').split(',')) {
    const host = makeHost({ module, processModel: 'isolate', warmSpare: true, maxConcurrent: 8, limits: { memoryBytes: 64 * mebibyte, timeout: 4000 } });
    await host.warm();
    const payload = parser === 'hugeResult' ? { mib: 30 } : null;
    const hostile = Array.from({ length: 7 }, () => host.runParser(parser, payload));
    const neighbour = host.runParser('slowEcho', { ms: 2500 });
    const results = await Promise.all([...hostile, neighbour]);
    console.log(parser, JSON.stringify(results.map(strip)));
    await host.close();
  }
}, 120_000);
