import { describe, expect, it } from 'vitest';
import type { ExecutionStats, SandboxEvent } from './events.ts';
import { createExecutionChannel } from './execution-handle.ts';

const stats: ExecutionStats = {
  wallMs: 1,
  cpuMs: 1,
  heapUsedBytes: 0,
  dataRequests: 0,
  dataBytes: 0,
  statusEvents: 1,
  statusDropped: 0,
  statusBytes: 2,
  resultBytes: 1,
};

async function collect(iterable: AsyncIterable<SandboxEvent>): Promise<SandboxEvent[]> {
  const events: SandboxEvent[] = [];
  for await (const event of iterable) events.push(event);
  return events;
}

describe('createExecutionChannel', () => {
  it('yields status events then exactly one terminal event, and ends', async () => {
    const channel = createExecutionChannel('e1', () => {});
    const reading = collect(channel.handle);
    channel.push({ type: 'status', source: 'console', level: 'info', message: 'hi' });
    expect(channel.push({ type: 'result', payload: 1, stats })).toBe(true);
    expect(channel.push({ type: 'error', code: 'CRASH', message: 'late' })).toBe(false);
    expect(channel.closed).toBe(true);
    const events = await reading;
    expect(events.map((event) => event.type)).toEqual(['status', 'result']);
    expect(await channel.handle.result).toEqual({ type: 'result', payload: 1, stats });
  });

  it('replays every event to a reader that starts late', async () => {
    const channel = createExecutionChannel('e2', () => {});
    channel.push({ type: 'status', source: 'reportStatus', level: 'warn', message: 'a' });
    channel.push({ type: 'error', code: 'TIMEOUT', message: 'slow' });
    expect((await collect(channel.handle)).length).toBe(2);
    expect((await collect(channel.handle)).length).toBe(2);
  });

  it('calls onCancel once, and not after the execution ended', async () => {
    const reasons: string[] = [];
    const channel = createExecutionChannel('e3', (reason) => {
      reasons.push(reason);
      channel.push({ type: 'error', code: 'CANCELLED', message: reason });
    });
    channel.handle.cancel('user left');
    channel.handle.cancel('again');
    expect(reasons).toEqual(['user left']);
    expect(await channel.handle.result).toMatchObject({ code: 'CANCELLED', message: 'user left' });

    const finished = createExecutionChannel('e4', () => reasons.push('should not run'));
    finished.push({ type: 'result', payload: null, stats });
    finished.handle.cancel();
    expect(reasons).toEqual(['user left']);
  });

  it('keeps its id', () => {
    expect(createExecutionChannel('abc', () => {}).handle.id).toBe('abc');
  });
});
