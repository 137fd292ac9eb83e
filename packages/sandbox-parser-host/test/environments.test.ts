// The parser host where bubblewrap cannot run, in the subprocess layer's simulated container
// (a seccomp profile refusing namespaces, as moby's does): its children run on the backend the
// subprocess layer's probe chose, Landlock, and every result says so.
import { describe, expect, it } from 'vitest';
import { nodeIn } from '../../sandbox-subprocess/test/support/environments.ts';

const fixture = new URL('./fixtures/environment-host.ts', import.meta.url).pathname;
const networkFixture = new URL('./fixtures/landlock-network-host.ts', import.meta.url).pathname;

describe('in a container whose seccomp profile refuses namespaces', () => {
  it.each(['auto', 'required'])('%s: parses under Landlock and reports it', async (mode) => {
    const result = JSON.parse(await nodeIn('moby-root', [fixture, mode]));
    expect(result).toMatchObject({
      ok: true,
      data: { payload: { hello: 'container' }, kwargs: {} },
      confinement: {
        sandbox: 'landlock',
        backend: 'landlock',
        degraded:
          'bubblewrap cannot run here: Landlock and seccomp confine the child (no namespaces)',
      },
    });
    expect(result.confinement.controls).toEqual(
      expect.arrayContaining([
        'landlock:filesystem',
        'landlock:no-tcp',
        'seccomp',
        'no-file-writes',
      ]),
    );
  });

  it("a parser's fetch goes through the egress proxy under Landlock; the result reports it", async () => {
    const { port, allowed, refused, served } = JSON.parse(
      await nodeIn('moby-root', [networkFixture]),
    );
    expect(allowed).toMatchObject({ ok: true, data: { status: 200, text: 'feed body' } });
    expect(allowed.confinement.backend).toBe('landlock');
    expect(allowed.confinement.controls).toEqual(
      expect.arrayContaining([
        'landlock:tcp-proxy-port-only',
        'egress-proxy',
        'seccomp-tcp-client-only',
      ]),
    );
    expect(allowed.confinement.controls).not.toContain('landlock:no-tcp');
    // One connection reached the server, the allowed one: the report's bytes are what it saw.
    expect(served).toHaveLength(1);
    expect(allowed.network).toEqual({
      allowed: [
        {
          host: 'feeds.test',
          port,
          bytes: served[0].read + served[0].written,
          bytesSent: served[0].read,
          bytesReceived: served[0].written,
          connections: 1,
        },
      ],
      denied: [],
    });
    expect(refused.data).toEqual({ failed: '0', message: 'Request was cancelled.' });
    expect(refused.network).toEqual({
      allowed: [],
      denied: [
        {
          host: 'other.test',
          port,
          reason: 'not-allowed',
          detail: `other.test:${port} matches no allow entry`,
        },
      ],
    });
  });
});
