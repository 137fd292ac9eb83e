import { closeSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildSeccompFilter } from './filter.ts';
import { openSeccompFilter } from './filter-file.ts';

describe('seccomp filter file', () => {
  it('holds the program and survives a temp cleaner removing it', () => {
    const options = { allowNetwork: false, allowedSyscalls: ['read', 'write', 'exit_group'] };
    const fd = openSeccompFilter(options);
    const path = readlinkSync(`/proc/self/fd/${fd}`);
    closeSync(fd);
    expect(readFileSync(path)).toEqual(buildSeccompFilter(options));
    rmSync(dirname(path), { recursive: true });
    const again = openSeccompFilter(options);
    expect(readFileSync(`/proc/self/fd/${again}`)).toEqual(buildSeccompFilter(options));
    closeSync(again);
  });
});
