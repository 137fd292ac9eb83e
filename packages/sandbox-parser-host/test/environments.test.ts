// The parser host where bubblewrap cannot run, in the subprocess layer's simulated container
// (a seccomp profile refusing namespaces, as moby's does): its children run on the backend the
// subprocess layer's probe chose, Landlock, and every result says so.
import { describe, expect, it } from 'vitest';
import { nodeIn } from '../../sandbox-subprocess/test/support/environments.ts';

const fixture = new URL('./fixtures/environment-host.ts', import.meta.url).pathname;

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
});
