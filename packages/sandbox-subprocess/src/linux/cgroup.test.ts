import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, utimesSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createRunCgroups, detectCgroups, ownGroups, removeStaleBases } from './cgroup.ts';

// mountinfo lines as the kernel writes them: id parent major:minor root mount-point options
// [optional fields] - fstype source super-options.
const pureV2 = {
  mountinfo:
    '35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n',
  cgroup: '0::/system.slice/agent.service/runner\n',
};
const dockerV1 = {
  mountinfo: [
    '600 590 0:40 /docker/abc123 /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime master:17 - cgroup cgroup rw,memory',
    '601 590 0:41 /docker/abc123 /sys/fs/cgroup/pids ro,nosuid,nodev,noexec,relatime master:18 - cgroup cgroup rw,pids',
    '602 590 0:42 /docker/abc123 /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct',
  ].join('\n'),
  cgroup: '12:pids:/docker/abc123\n9:memory:/docker/abc123/sub\n4:cpu,cpuacct:/docker/abc123\n',
};

describe('own cgroup discovery', () => {
  it('finds the group on a pure cgroup v2 host', () => {
    expect(ownGroups(pureV2.mountinfo, pureV2.cgroup, 'memory')).toEqual([
      { version: 2, dir: '/sys/fs/cgroup/system.slice/agent.service/runner' },
    ]);
  });

  it('strips a container mount root from v1 paths', () => {
    expect(ownGroups(dockerV1.mountinfo, dockerV1.cgroup, 'memory')).toEqual([
      { version: 1, dir: '/sys/fs/cgroup/memory/sub' },
    ]);
    expect(ownGroups(dockerV1.mountinfo, dockerV1.cgroup, 'pids')).toEqual([
      { version: 1, dir: '/sys/fs/cgroup/pids' },
    ]);
  });

  it('lists v2 first, then v1, on this (hybrid) host, and detection picks a writable one', () => {
    const mountinfo = readFileSync('/proc/self/mountinfo', 'utf8');
    const membership = readFileSync('/proc/self/cgroup', 'utf8');
    const memory = ownGroups(mountinfo, membership, 'memory');
    expect(memory.map((group) => group.version)).toEqual(
      mountinfo.includes(' - cgroup2 ') ? [2, 1] : [1],
    );
    const support = detectCgroups();
    // The project's machine: v1 memory and pids are writable, the empty v2 has no controllers.
    expect(support.memory?.version).toBe(1);
    expect(support.memory?.base).toBe(`${memory.at(-1)!.dir}/coda-sandbox-${process.pid}`);
    expect(support.pids?.version).toBe(1);
  });
});

describe('left-behind groups', () => {
  const deadPid = (): number => {
    const result = spawnSync('/bin/true');
    return result.pid!;
  };

  it('removes empty groups of a host that is gone, unless touched in the last minute', () => {
    const support = detectCgroups();
    const parent = dirname(support.pids!.base);
    const old = `${parent}/coda-sandbox-${deadPid()}`;
    const recent = `${parent}/coda-sandbox-${deadPid()}`;
    for (const base of [old, recent]) mkdirSync(`${base}/run-1`, { recursive: true });
    const twoMinutesAgo = new Date(Date.now() - 120_000);
    utimesSync(old, twoMinutesAgo, twoMinutesAgo);
    removeStaleBases(parent);
    expect(existsSync(old)).toBe(false);
    expect(existsSync(`${recent}/run-1`)).toBe(true);
    rmdirSync(`${recent}/run-1`);
    rmdirSync(recent);
  });

  it('re-creates this host’s base when someone removed it', async () => {
    const support = detectCgroups();
    for (const hierarchy of [support.memory!, support.pids!]) {
      if (existsSync(hierarchy.base)) rmdirSync(hierarchy.base);
    }
    const groups = createRunCgroups(support, { memoryBytes: 64 * 1024 * 1024, pids: 10 });
    expect(groups?.procsFiles.map(existsSync)).toEqual([true, true]);
    await groups!.kill();
    await groups!.remove();
  });
});
