// Attacks on processModel 'fork-server' across calls: each hostile call tries to leave something in
// its slot (the zygote, the descriptors every child inherits, the sandbox) for the next call of
// that slot, or to reach what the runner keeps from parser code, and the benign `probe` after it
// must see none of it. One slot per host, so that consecutive calls share it; real zygotes under
// both confinement modes. `token` is drawn once per zygote: an equal token means the same zygote.
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { ParserHostOptions, ParserResult } from '../src/index.ts';
import { makePythonHost } from './python-helpers.ts';

const module = fileURLToPath(new URL('./fixtures/python/cross_call.py', import.meta.url));

/** What `probe` sees in a slot no call has touched (its own output asked for aside). */
const untouched = {
  blocking: [true, true],
  scheduling: { nice: 0, policy: 0, cpus: availableParallelism(), 'own nice': 0, 'own policy': 0 },
  table: 'first line',
};

function dataOf(result: ParserResult): Record<string, unknown> {
  return result.data as Record<string, unknown>;
}

/** The first line of table.txt is 11 bytes with its newline; the file is 34. */
const secondLineOffset = 11;

describe.each([
  { mode: 'none', options: { confinement: 'none' } },
  { mode: 'default', options: {} },
] as const)('fork server across calls, confinement: $mode', ({ mode, options }) => {
  const host = (more: Partial<ParserHostOptions> = {}) =>
    makePythonHost({
      module,
      processModel: 'fork-server',
      warmSpare: true,
      spares: 1,
      ...options,
      ...more,
    });

  it('a console made non-blocking (os.set_blocking, no audit event): the next call prints 4 MB', async () => {
    const parsers = host();
    const first = await parsers.runParser('probe', {});
    const unblocked = await parsers.runParser('unblock_console', null);
    const next = await parsers.runParser('probe', { print: 4_000_000 });
    expect(unblocked).toMatchObject({ ok: true, data: ['ok: None', 'ok: None'] });
    // Without the reset the write failed: "BlockingIOError: [Errno 11] write could not complete".
    expect(next).toMatchObject({ ok: true, exitCode: 0 });
    expect(dataOf(next)).toMatchObject({
      ...untouched,
      printed: 'ok: None',
      token: dataOf(first).token,
    });
  });

  it("the zygote's nice value, CPUs and policy: taken away, and a rebuilt posix retires the slot", async () => {
    const parsers = host();
    const first = await parsers.runParser('probe', {});
    const plain = await parsers.runParser('deprioritise_zygote', null);
    expect(plain).toMatchObject({
      ok: true,
      data: {
        nice: "AttributeError: module 'os' has no attribute 'setpriority'",
        affinity: "AttributeError: module 'os' has no attribute 'sched_setaffinity'",
        idle: "AttributeError: module 'os' has no attribute 'sched_setscheduler'",
      },
    });
    const stays = await parsers.runParser('probe', {});
    expect(dataOf(stays)).toMatchObject({ ...untouched, token: dataOf(first).token });
    // Past the hook (the documented create_builtin gap) the calls succeed on the zygote...
    const rebuilt = await parsers.runParser('deprioritise_rebuilt', null);
    expect(rebuilt).toMatchObject({ ok: true, data: { nice: 'ok: None', affinity: 'ok: None' } });
    await parsers.warm();
    // ...which says so after the call, and the next call runs in a fresh slot at nice 0, all CPUs.
    const next = await parsers.runParser('probe', {});
    expect(next).toMatchObject({ ok: true, stderr: '' });
    expect(dataOf(next)).toMatchObject(untouched);
    expect(dataOf(next).token).not.toBe(dataOf(first).token);
  });

  it("a signal handler handed the runner's frame after the parser returned: no gate in it", async () => {
    const parsers = host();
    const result = await parsers.runParser('frame_after_return', null);
    // The handler ran in `main` (see below); before the fix it also found as_runner, fork and
    // serve_forks there, the fork gate the audit hook opens for the runner.
    expect(result).toMatchObject({ ok: true, data: 'x', stderr: 'FRAME main nonce\n' });
  });

  it('spawn: the same frame holds no gate either', async () => {
    const parsers = makePythonHost({ module, ...options });
    const result = await parsers.runParser('frame_after_return', null);
    expect(result).toMatchObject({ ok: true, data: 'x', stderr: 'FRAME main nonce\n' });
  });

  it("fifos, device nodes (no audit event) and shared memory in the slot's /tmp, cwd, home, /dev/shm: refused", async () => {
    const parsers = host();
    const made = await parsers.runParser('make_nodes', null);
    const denied = 'PermissionError: [Errno 13] Permission denied';
    const readOnly = 'OSError: [Errno 30] Read-only file system';
    const missing = 'FileNotFoundError: [Errno 2] No such file or directory';
    // Unconfined, Landlock refuses them (the cwd is a fresh directory under the host's /tmp, and
    // the home is unset); under bubblewrap /tmp and the home are read-only mounts as well.
    // POSIX shared memory and semaphores as well: _posixshmem imports (it is not refused), and
    // Landlock or the read-only /dev/shm stops it; _multiprocessing is refused by the hook.
    const semaphore =
      'RefusedToParsers: audit hook: import of _multiprocessing is not available to parsers';
    const expected: Record<string, string> =
      mode === 'none'
        ? {
            '/tmp fifo': denied,
            '/tmp node': denied,
            '~ fifo': missing,
            '~ node': missing,
            '/dev/shm fifo': denied,
            shm_open: `${denied}: '/left-shm'`,
            sem: semaphore,
          }
        : {
            '/tmp fifo': readOnly,
            '/tmp node': readOnly,
            '/home/sandbox fifo': readOnly,
            '/home/sandbox node': readOnly,
            '/dev/shm fifo': readOnly,
            shm_open: `${readOnly}: '/left-shm'`,
            sem: semaphore,
          };
    const data = dataOf(made);
    const cwdEntries = Object.entries(data).filter(([key]) => key.startsWith('/tmp/coda-parser-'));
    const others = Object.fromEntries(
      Object.entries(data).filter(([key]) => !key.startsWith('/tmp/coda-parser-')),
    );
    expect(others).toEqual(expected);
    expect(cwdEntries.map(([, outcome]) => outcome)).toEqual(
      mode === 'none' ? [denied, denied] : [],
    );
  });

  it("the zygote's control channel, stdin and memory through /proc: refused by the hook", async () => {
    const parsers = host();
    const result = await parsers.runParser('zygote_descriptors', null);
    const zygote = mode === 'none' ? '\\d+' : '2';
    const data = dataOf(result);
    const pattern = (text: string) =>
      new RegExp(`^RefusedToParsers: audit hook: ${text} is not available to parsers$`);
    expect(data['control for writing']).toMatch(
      pattern(`opening a file for writing \\(/proc/${zygote}/fd/4\\)`),
    );
    expect(data.control).toMatch(
      pattern(`opening /proc/${zygote}/fd/4 \\(outside the readable paths\\)`),
    );
    expect(data.stdin).toMatch(
      pattern(`opening /proc/${zygote}/fd/0 \\(outside the readable paths\\)`),
    );
    expect(data.memory).toMatch(
      pattern(`opening /proc/${zygote}/mem \\(outside the readable paths\\)`),
    );
    // The child closed its copy of fd 4 before the request was read.
    expect(data['own control']).toBe('OSError: [Errno 9] Bad file descriptor');
  });

  it('a double fork into a new session past the hook: the slot is replaced before the next call', async () => {
    const parsers = host();
    const first = await parsers.runParser('probe', {});
    const forked = await parsers.runParser('double_fork', null);
    await parsers.warm();
    const next = await parsers.runParser('probe', {});
    expect(forked).toMatchObject({ ok: true, data: 'forked' });
    // The grandchild writes to stderr every 10 ms for 30 s: none of it reaches the next call.
    expect(next).toMatchObject({ ok: true, stderr: '' });
    expect(dataOf(next)).toMatchObject(untouched);
    expect(dataOf(next).token).not.toBe(dataOf(first).token);
  });

  it('the zygote stopped with SIGSTOP past the hook: that call times out, the next is served', async () => {
    const parsers = host();
    const first = await parsers.runParser('probe', {});
    const stopped = await parsers.runParser('stop_zygote', null, { timeout: 2000 });
    await parsers.warm();
    const next = await parsers.runParser('probe', {});
    expect(stopped).toMatchObject({ ok: false, code: 'TIMEOUT', error: 'sandbox timeout' });
    expect(next).toMatchObject({ ok: true, stderr: '' });
    expect(dataOf(next)).toMatchObject(untouched);
    expect(dataOf(next).token).not.toBe(dataOf(first).token);
  });

  it("a call's stderr written just before it answers stays in that call's result", async () => {
    const parsers = host();
    const printed = await parsers.runParser('print_tail', { bytes: 200_000 });
    const next = await parsers.runParser('probe', {});
    expect(printed.stderr.startsWith('TAIL-OF-FIRST-CALL ')).toBe(true);
    expect(next).toMatchObject({ ok: true, stderr: '' });
  });

  it('a thread writing on the response channel around the answer: nothing of it reaches the next call', async () => {
    const parsers = host();
    const answered = await parsers.runParser('answer_with_tail', null);
    const next = await parsers.runParser('probe', {});
    // Bytes before the nonce are dropped, and the call's child is gone before the next call.
    expect(answered).toMatchObject({ ok: true, data: 'answered', stderr: '' });
    expect(next).toMatchObject({ ok: true, stderr: '' });
    expect(dataOf(next)).toMatchObject(untouched);
  });

  it('a file the module opened at import, read and sought by a call: the next call starts where the import left it', async () => {
    const parsers = host();
    const moved = await parsers.runParser('move_table', { to: secondLineOffset });
    const next = await parsers.runParser('read_table_unseeked', null);
    expect(moved).toMatchObject({
      ok: true,
      data: { read: 'first line', seek: `ok: ${secondLineOffset}` },
    });
    // Each child reopens it at the import's offset (0). Before, it inherited the zygote's open
    // file, whose offset the last call had left at 11.
    expect(next).toMatchObject({ ok: true, data: 'first line|0' });
  });
});

describe('memory outside the address space', () => {
  it('a memfd written past memoryBytes: os.memfd_create is taken away (unconfined nothing else saw it)', async () => {
    const parsers = makePythonHost({ module, confinement: 'none' });
    const result = await parsers.runParser(
      'memfd_hoard',
      { mib: 300 },
      { memoryBytes: 64 * 1024 * 1024 },
    );
    // Before: ok, 314 572 800 bytes held under a 64 MiB limit (RLIMIT_AS and the watchdog count
    // address space and resident memory; an unmapped memfd is neither).
    expect(result).toMatchObject({
      ok: false,
      code: 'RUNTIME',
      error: "module 'os' has no attribute 'memfd_create'",
    });
  });
});

describe('fork server, confinement: default (a pid namespace per slot)', () => {
  it('not protected (docs/security.md): every call of a slot has the zygote’s address layout', async () => {
    const parsers = makePythonHost({
      module,
      processModel: 'fork-server',
      warmSpare: true,
      spares: 1,
    });
    const first = await parsers.runParser('layout', null);
    const second = await parsers.runParser('layout', null);
    const spawned = await makePythonHost({ module }).runParser('layout', null);
    expect(second.data).toEqual(first.data);
    // A spawned child lays its heap out afresh (ASLR).
    expect(spawned.data).not.toEqual(first.data);
  });

  it('not protected (docs/security.md): threads move the next call’s pid, a channel between calls', async () => {
    const parsers = makePythonHost({
      module,
      processModel: 'fork-server',
      warmSpare: true,
      spares: 1,
    });
    const pids: number[] = [];
    for (const threads of [0, 0, 50, 0]) {
      const result = await parsers.runParser('start_threads', { threads });
      pids.push(result.data as number);
    }
    const steps = pids.slice(1).map((pid, index) => pid - (pids[index] as number));
    // One pid per call's child; each thread takes one more.
    expect(steps).toEqual([1, 1, 51]);
  });
});
