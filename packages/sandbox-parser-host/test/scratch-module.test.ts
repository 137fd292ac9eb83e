import { fileURLToPath } from 'node:url';
import { it } from 'vitest';
import { makeHost } from './helpers.ts';
const strip = (r: any) => ({ ok: r.ok, code: r.code, data: r.data, error: typeof r.error === 'string' ? r.error.slice(0, 200) : r.error, ms: Math.round(r.durationMs) });
it('modules', async () => {
  for (const dir of ['module-rejection', 'module-stack']) {
    const module = fileURLToPath(new URL(`./fixtures/isolate-attack/${dir}/parsers.mjs`, import.meta.url));
    const host = makeHost({ module, processModel: 'isolate', warmSpare: true, limits: { timeout: 1000 } });
    await host.warm();
    console.log(dir, JSON.stringify(strip(await host.runParser('echo', 1))));
  }
}, 60_000);
