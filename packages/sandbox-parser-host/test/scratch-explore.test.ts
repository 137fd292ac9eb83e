import { fileURLToPath } from 'node:url';
import { it } from 'vitest';
import { makeHost } from './helpers.ts';

const module = fileURLToPath(new URL('./fixtures/isolate-attack/attacks.mjs', import.meta.url));
const mebibyte = 1024 * 1024;
const only = process.env.ATTACK?.split(',');

it('explore', async () => {
  for (const [parser, payload] of [
    ['resizableByConstructor', null],
    ['resizableBySubclass', null],
    ['removed', null],
    ['resizableBomb', null],
    ['growableBomb', null],
    ['sharedBomb', null],
    ['intlBomb', { ms: 4000 }],
    ['atomicsWait', null],
    ['splitFatal', null],
    ['fillHuge', null],
    ['hugeResult', { mib: 30 }],
    ['hugeError', { mib: 14 }],
  ] as const) {
    if (only && !only.includes(parser)) continue;
    const host = makeHost({ module, processModel: 'isolate', warmSpare: true, maxConcurrent: 2, limits: { memoryBytes: 64 * mebibyte, timeout: 5000 } });
    await host.warm();
    const t0 = performance.now();
    const neighbour = host.runParser('slowEcho', { ms: 3000 });
    const hostile = host.runParser(parser, payload);
    const [h, n] = await Promise.all([hostile, neighbour]);
    const strip = (r: any) => ({ ok: r.ok, code: r.code, error: typeof r.error === 'string' ? r.error.slice(0, 200) : r.error, data: typeof r.data === 'string' ? r.data.slice(0, 50) : r.data, ms: Math.round(r.durationMs) });
    console.log(parser, JSON.stringify({ hostile: strip(h), neighbour: strip(n), wall: Math.round(performance.now() - t0) }));
    await host.close();
  }
}, 120_000);
