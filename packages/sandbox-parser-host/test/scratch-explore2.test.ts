import { fileURLToPath } from 'node:url';
import { it } from 'vitest';
import { makeHost } from './helpers.ts';

const module = fileURLToPath(new URL('./fixtures/isolate-attack/attacks.mjs', import.meta.url));
const mebibyte = 1024 * 1024;
const strip = (r: any) => ({ ok: r.ok, code: r.code, data: r.data, error: typeof r.error === 'string' ? r.error.slice(0, 160) : r.error, ms: Math.round(r.durationMs) });

it('explore2', async () => {
  const host = makeHost({ module, processModel: 'isolate', warmSpare: true, maxConcurrent: 2, limits: { memoryBytes: 64 * mebibyte, timeout: 1500 } });
  await host.warm();
  for (const parser of (process.env.ATTACK ?? 'rejectionTrap,rejectionStack,finalizerSpin,throwTrap').split(',')) {
    const [h, n] = await Promise.all([host.runParser(parser, null), host.runParser('slowEcho', { ms: 500 })]);
    console.log(parser, JSON.stringify({ hostile: strip(h), neighbour: strip(n) }));
  }
}, 120_000);
