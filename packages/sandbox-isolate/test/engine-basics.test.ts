import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { collect, expectResult } from './helpers.ts';

describe.each(['process', 'in-process'] as const)('SandboxEngine basics (%s)', (isolation) => {
  const engine = new SandboxEngine({
    isolation,
    dataHandler: (params) => ({ echo: params }),
  });
  afterAll(() => engine.dispose());

  it('returns the value of the code as the payload, with stats', async () => {
    const event = expectResult(await engine.run({ code: 'return 1 + 1' }));
    expect(event.payload).toBe(2);
    expect(event.stats).toMatchObject({ resultBytes: 1, dataRequests: 0, statusEvents: 0 });
    expect(event.stats.wallMs).toBeGreaterThan(0);
  });

  it('yields status events, then exactly one terminal event', async () => {
    const events = await collect(
      engine.submit({
        code: 'console.log("a", 1); reportStatus("step", { n: 2 }); return await dataProxy.request({ q: 1 });',
      }),
    );
    expect(events).toEqual([
      { type: 'status', source: 'console', level: 'info', message: 'a 1' },
      { type: 'status', source: 'reportStatus', level: 'info', message: 'step', data: { n: 2 } },
      {
        type: 'result',
        payload: { echo: { q: 1 } },
        stats: expect.objectContaining({ dataRequests: 1, statusEvents: 2 }),
      },
    ]);
  });
});
