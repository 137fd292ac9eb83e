// The kernel counts some resources per user, whatever the cgroup: inotify instances
// (fs.inotify.max_user_instances), POSIX message-queue bytes (RLIMIT_MSGQUEUE), queued
// signals (RLIMIT_SIGPENDING) and descriptors in flight in SCM_RIGHTS messages (the sender's
// RLIMIT_NOFILE against its user's count; added by the stop 36 attack review). Runs under one identity share them; runs under distinct `runAs`
// uids do not. These tests measure both, which is what docs/security.md says about it.
import { describe, expect, it } from 'vitest';
import { createSandbox } from '../src/index.ts';
import { python } from './support/helpers.ts';

// `hold` takes every instance, queue byte, queued signal and in-flight descriptor its uid may have, prints how many,
// and keeps them until stdin closes; `probe` asks for one of each and prints the errno (0: got it).
const script = `
import ctypes, os, signal, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
class Attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long),
                ("curmsgs", ctypes.c_long), ("reserved", ctypes.c_long * 4)]
def errno_of(result):
    return 0 if result >= 0 else ctypes.get_errno()
def inotify(_):
    return errno_of(libc.inotify_init())
def mqueue(i):
    name = ("/coda-%d-%d" % (os.getpid(), i)).encode()
    return errno_of(libc.mq_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600, ctypes.byref(Attr(0, 10, 8192, 0))))
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
def queued_signal(_):
    # sigqueue, not kill: the kernel exempts kill() from RLIMIT_SIGPENDING.
    return errno_of(libc.sigqueue(os.getpid(), signal.SIGRTMIN, ctypes.c_void_p(0)))
pair = socket.socketpair()
pair[0].setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
def in_flight(_):
    # One descriptor sent in a message nobody reads: it counts until the socket closes.
    try:
        socket.send_fds(pair[0], [b"x"], [0])
        return 0
    except OSError as e:
        return e.errno
def take_all(take):
    count = 0
    while take(count) == 0:
        count += 1
    return count
if sys.argv[1] == "hold":
    print(take_all(inotify), take_all(mqueue), take_all(queued_signal), take_all(in_flight), flush=True)
    sys.stdin.read()
else:
    print(inotify(0), mqueue(0), queued_signal(0), in_flight(0))
`;

// Errno values from the kernel's headers, not from the code under test.
const EMFILE = 24;
const EAGAIN = 11;
const ETOOMANYREFS = 109;
const policy = { allowNetwork: false, allowFileWrites: false, timeoutMs: 30_000 } as const;

/** Runs `probe` while another run under the default identity holds all three counts. */
async function probeWhileHeld(
  probePolicy: typeof policy & { runAs?: { uid: number; gid: number } },
) {
  const holder = createSandbox(policy).spawn(python, ['-c', script, 'hold']);
  try {
    const held = await firstLine(holder.stdout);
    const probe = await createSandbox(probePolicy).run(python, ['-c', script, 'probe']);
    return { held, probe: probe.stdout.trim() };
  } finally {
    holder.stdin.end();
    await holder.exited;
  }
}

function firstLine(stream: NodeJS.ReadableStream): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    stream.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes('\n')) resolve(text.split('\n')[0]!);
    });
    stream.on('end', () => reject(new Error(`the holder ended before it held anything: ${text}`)));
  });
}

describe('per-user kernel counts', () => {
  it('are shared by runs under the same identity: the second run gets none while the first holds them', async () => {
    const { held, probe } = await probeWhileHeld(policy);
    const [instances, queues, signals, descriptors] = held.split(' ').map(Number);
    expect(instances).toBeGreaterThan(0);
    expect(queues).toBeGreaterThan(0);
    expect(signals).toBeGreaterThan(0);
    expect(descriptors).toBeGreaterThan(0);
    expect(probe).toBe(`${EMFILE} ${EMFILE} ${EAGAIN} ${ETOOMANYREFS}`);
  });

  it('are separate for a run under another runAs uid', async () => {
    const { probe } = await probeWhileHeld({ ...policy, runAs: { uid: 4242, gid: 4242 } });
    expect(probe).toBe('0 0 0 0');
  });

  it('are all available to a run when no other run holds them', async () => {
    const alone = await createSandbox(policy).run(python, ['-c', script, 'probe']);
    expect(alone.stdout.trim()).toBe('0 0 0 0');
  });
});
