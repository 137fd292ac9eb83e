import { closeSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { unlinkedFile } from './unlinked-file.ts';

describe('unlinkedFile', () => {
  it('gives a descriptor of the bytes and leaves nothing in the temp dir', () => {
    const before = readdirSync(tmpdir()).filter((name) => name.startsWith('coda-run-'));
    const fd = unlinkedFile(Buffer.from('seccomp program'));
    expect(readlinkSync(`/proc/self/fd/${fd}`)).toMatch(/\(deleted\)$/);
    expect(readFileSync(fd, 'utf8')).toBe('seccomp program');
    closeSync(fd);
    expect(readdirSync(tmpdir()).filter((name) => name.startsWith('coda-run-'))).toEqual(before);
  });
});
