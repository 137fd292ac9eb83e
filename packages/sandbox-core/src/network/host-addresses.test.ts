import { describe, expect, it } from 'vitest';
import { ipv6InterfaceAddresses, localIpv4Routes, localIpv6Routes } from './host-addresses.ts';
import { formatIpAddress, type IpRange } from './ip-address.ts';

const text = (range: IpRange) => `${formatIpAddress(range.address)}/${range.prefix}`;

// Excerpts in the kernel's own formats (Linux 6.18), written out here, not produced by the code.
const fibTrie = `Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 9.9.0.0/16 2 0 2
        |-- 9.9.0.0
           /16 host LOCAL
     |-- 8.8.4.4
        /32 host LOCAL
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     |-- 192.0.2.0
        /24 link UNICAST
Local:
  +-- 0.0.0.0/0 3 0 5
     |-- 192.0.2.2
        /32 host LOCAL
     |-- 192.0.2.3
        /32 host LOCAL tos=16
Id 100:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 host LOCAL
`;

const ipv6Route = `fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000003 00000000 80200001       lo
260016180001000000000000000000000 60 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000001 00000000 80200001       lo
26001f18000100000000000000000000 60 00000000000000000000000000000000 00 00000000000000000000000000000000 00000400 00000001 00000000 80000001       lo
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 00000400 00000001 00000000 80000001       lo
ff000000000000000000000000000000 08 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000003 00000000 00000001     eth0
`;

const ifInet6 = `fd000000000000000000000000000002 02 40 00 80     eth0
26001f18000000000000000000000005 05 80 00 80       v0
`;

describe('the host’s local routes, from /proc', () => {
  it('reads every LOCAL route of fib_trie, of any table, with its prefix; not a local default route (TPROXY)', () => {
    expect(localIpv4Routes(fibTrie).map(text)).toEqual([
      '9.9.0.0/16',
      '8.8.4.4/32',
      '127.0.0.0/8',
      '127.0.0.1/32',
      '192.0.2.2/32',
      '192.0.2.3/32',
    ]);
  });

  it('reads the IPv6 routes flagged RTF_LOCAL, skipping a malformed line and a local default route', () => {
    expect(localIpv6Routes(ipv6Route).map(text)).toEqual(['::1/128', '2600:1f18:1::/96']);
  });

  it('reads every IPv6 interface address, whatever its interface’s state', () => {
    expect(ipv6InterfaceAddresses(ifInet6).map(formatIpAddress)).toEqual([
      'fd00::2',
      '2600:1f18::5',
    ]);
  });

  it('reads nothing from an empty file (not Linux)', () => {
    expect([localIpv4Routes(''), localIpv6Routes(''), ipv6InterfaceAddresses('')]).toEqual([
      [],
      [],
      [],
    ]);
  });
});
