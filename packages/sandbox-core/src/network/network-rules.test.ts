import { describe, expect, it } from 'vitest';
import { SandboxValidationError } from '../errors/error-classes.ts';
import { type AddressClass, classifyAddress } from './address-class.ts';
import { admitDestination } from './admit.ts';
import { parseHostPattern } from './host-pattern.ts';
import { formatIpAddress, parseIpAddress, parseIpRange } from './ip-address.ts';
import { NetworkRules } from './network-rules.ts';
import { holdProxyListenerPort } from './proxy-listeners.ts';

const ip = (text: string) => {
  const parsed = parseIpAddress(text);
  if (parsed === undefined) throw new Error(`test table: ${text} is not an address`);
  return parsed;
};

/** What `rules` says to a program naming `host:port`: 'ok' or the refusal's reason. */
function literalVerdict(rules: NetworkRules, host: string, port: number): string {
  const destination = NetworkRules.destination(host);
  if (!('kind' in destination)) return destination.ok ? 'ok' : destination.reason;
  const verdict = rules.checkDestination(destination, port);
  return verdict.ok ? 'ok' : verdict.reason;
}

/** What `rules` says to a name that resolved to `address`: 'ok' or the refusal's reason. */
function resolvedVerdict(rules: NetworkRules, address: string, port: number): string {
  const verdict = rules.checkResolved(ip(address), port);
  return verdict.ok ? 'ok' : verdict.reason;
}

describe('IP literals', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['::1', '::1'],
    ['[::1]', '::1'],
    ['::ffff:127.0.0.1', '::ffff:7f00:1'],
    ['2001:DB8:0:0:0:0:0:1', '2001:db8::1'],
    ['fe80::1:2', 'fe80::1:2'],
  ])('%s reads as %s', (text, canonical) => {
    expect(formatIpAddress(ip(text))).toBe(canonical);
  });

  it.each([
    '0x7f.0.0.1',
    '2130706433',
    '127.1',
    '127.000.0.1',
    '1.2.3.256',
    ':::1',
    '1::2::3',
    'fe80::1%eth0',
  ])('%s is not a strict literal', (text) => {
    expect(parseIpAddress(text)).toBeUndefined();
  });

  it('refuses a CIDR with host bits set', () => {
    expect(parseIpRange('10.0.0.1/8')).toBeUndefined();
    expect(parseIpRange('10.0.0.0/8')).toBeDefined();
    expect(parseIpRange('10.0.0.0/33')).toBeUndefined();
  });
});

describe('address classes', () => {
  const table: [string, AddressClass][] = [
    ['8.8.8.8', 'public'],
    ['127.0.0.1', 'loopback'],
    ['127.45.6.7', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['169.254.169.254', 'metadata'],
    ['fd00:ec2::254', 'metadata'],
    ['fd00:ec2::23', 'metadata'], // AWS EKS Pod Identity Agent
    ['fd20:ce::254', 'metadata'], // GCP over IPv6
    ['fd00:42::42', 'metadata'], // Scaleway over IPv6
    ['168.63.129.16', 'metadata'], // Azure WireServer
    ['::ffff:168.63.129.16', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['169.254.1.1', 'link-local'],
    ['fe80::1', 'link-local'],
    ['10.1.2.3', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.1', 'public'],
    ['192.168.0.1', 'private'],
    ['fd12:3456::1', 'private'],
    ['100.64.0.1', 'cgnat'],
    ['100.128.0.1', 'public'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['255.255.255.255', 'reserved'],
    ['64:ff9b::7f00:1', 'loopback'], // NAT64 of 127.0.0.1
    ['::ffff:0:7f00:1', 'loopback'], // IPv4-translated (SIIT) of 127.0.0.1
    ['::ffff:0:a9fe:a9fe', 'metadata'], // IPv4-translated of 169.254.169.254
    ['::ffff:0:808:808', 'public'], // IPv4-translated of 8.8.8.8
    ['64:ff9b:1:7f00:0:100:808:808', 'reserved'], // local-use NAT64, /48 layout of 127.0.0.1
    ['64:ff9b:1::7f00:1', 'reserved'], // local-use NAT64, /96 layout: still no safe reading
    ['0:0:0:1::1', 'reserved'], // elsewhere in ::/8
    ['2002:a9fe:a9fe::1', 'metadata'], // 6to4 of 169.254.169.254
    ['2001:db8::1', 'reserved'],
    ['2606:4700::1111', 'public'],
  ];
  it.each(table)('%s is %s', (text, kind) => {
    expect(classifyAddress(ip(text))).toBe(kind);
  });

  it('names the host’s own addresses', () => {
    expect(classifyAddress(ip('203.0.114.7'), [ip('203.0.114.7')])).toBe('host');
    expect(classifyAddress(ip('::ffff:203.0.114.7'), [ip('203.0.114.7')])).toBe('host');
  });

  it('names every address of a range the host delivers to itself', () => {
    const local = [{ address: ip('9.9.0.0'), prefix: 16 }];
    expect(classifyAddress(ip('9.9.9.9'), local)).toBe('host');
    expect(classifyAddress(ip('::ffff:9.9.200.1'), local)).toBe('host');
    expect(classifyAddress(ip('9.10.0.1'), local)).toBe('public');
  });
});

describe('allow and deny patterns', () => {
  it.each([
    ['*', 'a pattern for every host'],
    ['*.', 'after "*."'],
    ['api.*.com', '"*" is only allowed'],
    ['example.com:0', 'expected a port'],
    ['example.com:70000', 'expected a port'],
    ['bad host', 'expected a host name'],
    ['10.0.0.1/8', 'expected a CIDR range'],
    ['[127.0.0.1]:80', 'expected an IPv6 address inside'],
    ['1.2.3', 'numeric last label'],
    ['0.0.0.0/0', 'a range of every address'],
    ['::/0', 'a range of every address'],
    ['::ffff:0:0/96', 'a range of every address'], // every IPv4 address, written mapped
    ['::/8', 'holds the IPv4-mapped block'],
    ['::fffe:0:0/95', 'holds the IPv4-mapped block'],
  ])('refuses %j', (entry, message) => {
    const parsed = parseHostPattern(entry);
    expect('error' in parsed && parsed.error).toContain(message);
  });

  it('names each bad entry in the validation error', () => {
    expect(() => new NetworkRules({ allow: ['ok.example', '*'], deny: ['x:99999'] })).toThrow(
      SandboxValidationError,
    );
    try {
      new NetworkRules({ allow: ['ok.example', '*'], deny: ['x:99999'] });
    } catch (error) {
      const issues = (error as SandboxValidationError).issues.map((issue) => [
        issue.path,
        issue.received,
      ]);
      expect(issues).toEqual([
        ['allow.1', '"*"'],
        ['deny.0', '"x:99999"'],
      ]);
    }
  });

  const rules = new NetworkRules({
    allow: [
      'registry.npmjs.org',
      '*.githubusercontent.com',
      'api.example.com:443',
      '10.0.0.5',
      '192.168.7.0/24',
      '[fd00::1]:8443',
    ],
    deny: ['evil.githubusercontent.com'],
  });
  const check = (host: string, port: number) => literalVerdict(rules, host, port);
  it.each([
    ['registry.npmjs.org', 443, 'ok'],
    ['REGISTRY.npmjs.org.', 80, 'ok'],
    ['npmjs.org', 443, 'not-allowed'],
    ['raw.githubusercontent.com', 443, 'ok'],
    ['a.b.githubusercontent.com', 443, 'ok'],
    ['githubusercontent.com', 443, 'not-allowed'],
    ['evil.githubusercontent.com', 443, 'denied'],
    ['api.example.com', 443, 'ok'],
    ['api.example.com', 80, 'not-allowed'],
    ['10.0.0.5', 22, 'ok'],
    ['10.0.0.6', 22, 'ip-literal'],
    ['192.168.7.9', 80, 'ok'],
    ['::ffff:10.0.0.5', 80, 'ok'],
    ['fd00::1', 8443, 'ok'],
    ['fd00::1', 443, 'ip-literal'],
    ['127.0.0.1', 80, 'ip-literal'],
    ['2130706433', 80, 'invalid-host'],
    ['0x7f.1', 80, 'invalid-host'],
    ['224.0.0.1', 80, 'private-address'],
  ])('%s:%d → %s', (host, port, expected) => {
    expect(check(host, port)).toBe(expected);
  });
});

describe('resolved addresses', () => {
  const strict = new NetworkRules({ allow: ['api.test'] });
  const open = new NetworkRules({ allow: ['api.test'], allowPrivate: true });
  const cidr = new NetworkRules({
    allow: ['api.test', '169.254.0.0/16'],
    deny: ['10.9.0.0/16'],
    allowPrivate: true,
  });
  const verdict = (rules: NetworkRules, address: string) => {
    const result = rules.checkResolved(ip(address), 443, [ip('198.51.100.9')]);
    return result.ok ? 'ok' : result.reason;
  };
  it.each([
    ['8.8.8.8', 'ok', 'ok', 'ok'],
    ['127.0.0.1', 'private-address', 'ok', 'ok'],
    ['::ffff:127.0.0.1', 'private-address', 'ok', 'ok'],
    ['10.1.1.1', 'private-address', 'ok', 'ok'],
    ['10.9.1.1', 'private-address', 'ok', 'denied'],
    ['64:ff9b::a09:101', 'private-address', 'ok', 'denied'], // NAT64 of 10.9.1.1
    ['::ffff:0:a09:101', 'private-address', 'ok', 'denied'], // IPv4-translated of 10.9.1.1
    ['2002:a09:101::1', 'private-address', 'ok', 'denied'], // 6to4 of 10.9.1.1
    ['64:ff9b::a08:101', 'private-address', 'ok', 'ok'], // NAT64 of 10.8.1.1, outside the deny range
    ['100.64.1.1', 'private-address', 'ok', 'ok'],
    ['169.254.169.254', 'private-address', 'private-address', 'ok'],
    ['fe80::1', 'private-address', 'private-address', 'private-address'],
    ['224.0.0.1', 'private-address', 'private-address', 'private-address'],
    ['0.0.0.0', 'private-address', 'private-address', 'private-address'],
  ])('%s: strict %s, allowPrivate %s, with a CIDR %s', (address, a, b, c) => {
    expect([verdict(strict, address), verdict(open, address), verdict(cidr, address)]).toEqual([
      a,
      b,
      c,
    ]);
  });
  it('says which class refused the address', () => {
    expect(strict.checkResolved(ip('169.254.169.254'), 80)).toEqual({
      ok: false,
      reason: 'private-address',
      detail: 'resolved to 169.254.169.254 (metadata)',
    });
  });
});

describe('a CIDR reaches special-purpose addresses only from inside special-purpose space', () => {
  // Two /1 ranges are every IPv4 address, as 0.0.0.0/0 (refused) is: meant as "the internet",
  // they used to reach the host's loopback, every private network and the metadata address too
  // (attack round 36). A range inside special-purpose space still names it on purpose.
  const host = ip('93.184.216.34'); // a public address that is the host's own
  const wide = new NetworkRules({ allow: ['api.test', '0.0.0.0/1', '128.0.0.0/1', '2000::/3'] });
  const narrow = new NetworkRules({
    allow: [
      'api.test',
      '10.0.0.0/8',
      '169.254.0.0/16',
      '127.0.0.0/16',
      'fd00::/8',
      '93.184.216.34/32',
    ],
  });
  const resolved = (rules: NetworkRules, address: string) => {
    const result = rules.checkResolved(ip(address), 443, [host]);
    return result.ok ? 'ok' : result.reason;
  };
  const named = (rules: NetworkRules, address: string) => {
    const destination = NetworkRules.destination(address);
    if (!('kind' in destination)) throw new Error(`test table: ${address} is not a destination`);
    const result = rules.checkDestination(destination, 443, [host]);
    return result.ok ? 'ok' : result.reason;
  };
  const refusedName = 'private-address';
  const refusedLiteral = 'ip-literal';
  it.each([
    // address, [wide: resolved, literal], [narrow: resolved, literal]
    ['8.8.8.8', ['ok', 'ok'], ['ok', refusedLiteral]],
    ['2001:4860::8888', ['ok', 'ok'], ['ok', refusedLiteral]],
    ['127.0.0.1', [refusedName, refusedLiteral], ['ok', 'ok']],
    ['127.1.0.1', [refusedName, refusedLiteral], [refusedName, refusedLiteral]],
    ['10.1.1.1', [refusedName, refusedLiteral], ['ok', 'ok']],
    ['172.16.0.1', [refusedName, refusedLiteral], [refusedName, refusedLiteral]],
    ['100.64.1.1', [refusedName, refusedLiteral], [refusedName, refusedLiteral]],
    ['169.254.169.254', [refusedName, refusedLiteral], ['ok', 'ok']],
    ['168.63.129.16', [refusedName, refusedLiteral], [refusedName, refusedLiteral]],
    ['2002:a9fe:a9fe::1', [refusedName, refusedLiteral], ['ok', 'ok']], // 6to4 of the metadata address
    ['fd00:ec2::254', [refusedName, refusedLiteral], ['ok', 'ok']],
    ['93.184.216.34', [refusedName, refusedLiteral], ['ok', 'ok']],
  ])('%s: wide %j, narrow %j', (address, wideVerdicts, narrowVerdicts) => {
    expect([resolved(wide, address), named(wide, address)]).toEqual(wideVerdicts);
    expect([resolved(narrow, address), named(narrow, address)]).toEqual(narrowVerdicts);
  });
  it('says why a wide range did not reach an IP literal', () => {
    const destination = NetworkRules.destination('127.0.0.1');
    if (!('kind' in destination)) throw new Error('127.0.0.1 is an IP destination');
    expect(wide.checkDestination(destination, 80)).toEqual({
      ok: false,
      reason: 'ip-literal',
      detail:
        '127.0.0.1 (loopback) is an IP address no allow entry names: only its IP or a CIDR inside special-purpose ranges reaches a loopback address',
    });
  });
});

describe('deny entries and the IPv6 forms of an IPv4 address', () => {
  // Allow CIDRs that cover the IPv6 forms, as a host reaching IPv4 through NAT64 would need.
  const rules = new NetworkRules({
    allow: ['api.test', '64:ff9b::/96', '::ffff:0:0:0/96', '2002::/16', '10.0.0.0/8'],
    deny: ['10.9.0.0/16', '169.254.169.254'],
  });
  const named = (address: string) => literalVerdict(rules, address, 443);
  it.each([
    ['10.9.1.1', 'denied'],
    ['64:ff9b::a09:101', 'denied'], // NAT64 of 10.9.1.1
    ['::ffff:0:a09:101', 'denied'], // IPv4-translated of 10.9.1.1
    ['2002:a09:101::1', 'denied'], // 6to4 of 10.9.1.1
    ['64:ff9b::a9fe:a9fe', 'denied'], // NAT64 of the metadata address
    ['64:ff9b::a08:101', 'ok'], // NAT64 of 10.8.1.1: allowed by its CIDR, not denied
  ])('an IP literal %s: %s', (address, verdict) => {
    expect(named(address)).toBe(verdict);
  });
});

describe('wide deny ranges', () => {
  it.each(['::/0', '0.0.0.0/0', '::/8'])(
    '%s is a valid deny entry, matched as written',
    (entry) => {
      expect(parseHostPattern(entry, 'deny')).toMatchObject({ kind: 'cidr' });
    },
  );
  it('denies every IPv6 address with ::/0 and leaves IPv4 to the rest', () => {
    const rules = new NetworkRules({ allow: ['api.test'], deny: ['::/0'] });
    expect(rules.checkResolved(ip('2606:4700::1111'), 443)).toMatchObject({ reason: 'denied' });
    expect(rules.checkResolved(ip('8.8.8.8'), 443)).toEqual({ ok: true });
  });
});

describe('entries written in IPv4-mapped form', () => {
  // Addresses are checked with mapped forms unwrapped, so a mapped entry must name IPv4.
  const rules = new NetworkRules({
    allow: ['api.test', '127.0.0.0/8'],
    deny: ['::ffff:127.0.0.0/104', '[::ffff:10.1.2.3]'],
    allowPrivate: true,
  });
  const literal = (host: string) => literalVerdict(rules, host, 80);
  const resolved = (address: string) => resolvedVerdict(rules, address, 80);
  it.each([
    ['127.0.0.1', 'denied'],
    ['::ffff:127.9.9.9', 'denied'],
    ['10.1.2.3', 'denied'],
  ])('a literal %s: %s', (host, expected) => {
    expect(literal(host)).toBe(expected);
  });
  it.each([
    ['127.0.0.1', 'denied'],
    ['::ffff:127.0.0.1', 'denied'],
    ['10.1.2.3', 'denied'],
    ['10.1.2.4', 'ok'],
  ])('a name resolving to %s: %s', (address, expected) => {
    expect(resolved(address)).toBe(expected);
  });
  it('reads a mapped entry as the IPv4 it names', () => {
    expect(parseHostPattern('::ffff:127.0.0.0/104')).toEqual({
      kind: 'cidr',
      range: { address: ip('127.0.0.0'), prefix: 8 },
      port: undefined,
    });
    expect(parseHostPattern('[::ffff:10.1.2.3]:443')).toEqual({
      kind: 'ip',
      address: ip('10.1.2.3'),
      port: 443,
    });
  });
});

describe('allow ranges and the IPv4 inside an IPv6 address', () => {
  // A wide IPv6 range names the IPv6 forms of public IPv4 addresses, never of private ones.
  const rules = new NetworkRules({ allow: ['*.test', '2000::/3', '64:ff9b::/96'] });
  const literal = (host: string) => literalVerdict(rules, host, 443);
  const resolved = (address: string) => resolvedVerdict(rules, address, 443);
  it.each([
    ['2002:a9fe:a9fe::1', 'private-address'], // 6to4 of 169.254.169.254
    ['2002:7f00:1::1', 'private-address'], // 6to4 of 127.0.0.1
    ['64:ff9b::a9fe:a9fe', 'private-address'], // NAT64 of 169.254.169.254
    ['64:ff9b::7f00:1', 'private-address'], // NAT64 of 127.0.0.1
    ['2002:808:808::1', 'ok'], // 6to4 of 8.8.8.8: public
    ['2606:4700::1111', 'ok'],
  ])('a name resolving to %s: %s', (address, expected) => {
    expect(resolved(address)).toBe(expected);
  });
  it.each([
    ['64:ff9b::a9fe:a9fe', 'ip-literal'],
    ['2002:7f00:1::1', 'ip-literal'],
    ['64:ff9b::808:808', 'ok'],
    ['2606:4700::1111', 'ok'],
  ])('a literal %s: %s', (host, expected) => {
    expect(literal(host)).toBe(expected);
  });
  it('never reaches the host through the IPv6 form of its own public IPv4, or under a local NAT64 route', () => {
    const host = [ip('8.8.4.4'), { address: ip('64:ff9b::'), prefix: 96 }];
    expect(rules.checkResolved(ip('2002:808:404::1'), 443, [ip('8.8.4.4')])).toEqual({
      ok: false,
      reason: 'private-address',
      detail: 'resolved to 2002:808:404::1 (host)',
    });
    expect(classifyAddress(ip('64:ff9b::808:808'), host)).toBe('host');
    const destination = NetworkRules.destination('64:ff9b::808:404');
    if (!('kind' in destination)) throw new Error('test table: not a destination');
    expect(rules.checkDestination(destination, 443, [ip('8.8.4.4')])).toMatchObject({
      ok: false,
      reason: 'ip-literal',
    });
  });

  it('reaches the private IPv4 inside when a range names that IPv4', () => {
    const named = new NetworkRules({ allow: ['*.test', '127.0.0.0/8'] });
    expect(named.checkResolved(ip('64:ff9b::7f00:1'), 443)).toEqual({ ok: true });
  });
});

describe('admitDestination', () => {
  const rules = new NetworkRules({ allow: ['api.test', 'mixed.test', 'gone.test', '10.0.0.5'] });
  const table: Record<string, string[]> = {
    'api.test': ['8.8.4.4', '2001:4860::8844'],
    'mixed.test': ['8.8.8.8', '127.0.0.1'],
  };
  const lookup = async (name: string) => {
    const answers = table[name];
    if (answers === undefined) throw new Error(`ENOTFOUND ${name}`);
    return answers.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  it.each([
    ['API.test', { ok: true, host: 'api.test', port: 443, address: '8.8.4.4', family: 4 }],
    ['10.0.0.5', { ok: true, host: '10.0.0.5', port: 443, address: '10.0.0.5', family: 4 }],
    [
      'mixed.test',
      {
        ok: false,
        host: 'mixed.test',
        port: 443,
        reason: 'private-address',
        detail: 'resolved to 127.0.0.1 (loopback)',
      },
    ],
    [
      'gone.test',
      {
        ok: false,
        host: 'gone.test',
        port: 443,
        reason: 'resolve-failed',
        detail: 'could not resolve gone.test: ENOTFOUND gone.test',
      },
    ],
    [
      'other.test',
      {
        ok: false,
        host: 'other.test',
        port: 443,
        reason: 'not-allowed',
        detail: 'other.test:443 matches no allow entry',
      },
    ],
    [
      'bad host',
      {
        ok: false,
        host: 'bad host',
        port: 443,
        reason: 'invalid-host',
        detail: 'expected a host name of letters, digits, "-" and "_" between dots',
      },
    ],
  ])('%s', async (host, expected) => {
    expect(await admitDestination(rules, host, 443, lookup)).toEqual(expected);
  });

  it("refuses 127.0.0.1 at a port of this process's egress proxy listeners, whatever the policy", async () => {
    const loopback = new NetworkRules({ allow: ['loop.test', '127.0.0.1'], allowPrivate: true });
    const answers: Record<string, string> = {
      'loop.test': '127.0.0.1',
      'mapped.test': '::ffff:127.0.0.1',
    };
    const resolve = async (name: string) => [
      { address: answers[name] ?? '127.0.0.2', family: answers[name]?.includes(':') ? 6 : 4 },
    ];
    const wide = new NetworkRules({ allow: ['*.test', '127.0.0.1'], allowPrivate: true });
    const release = holdProxyListenerPort(40_001);
    try {
      const refusal = (host: string, address: string) => ({
        ok: false,
        host,
        port: 40_001,
        reason: 'private-address',
        detail: `${address}:40001 is a listener of this host's egress proxy (another run's way out)`,
      });
      expect(await admitDestination(loopback, 'loop.test', 40_001, resolve)).toEqual(
        refusal('loop.test', '127.0.0.1'),
      );
      expect(await admitDestination(loopback, '127.0.0.1', 40_001, resolve)).toEqual(
        refusal('127.0.0.1', '127.0.0.1'),
      );
      expect(await admitDestination(wide, 'mapped.test', 40_001, resolve)).toEqual(
        refusal('mapped.test', '::ffff:127.0.0.1'),
      );
      // Another port, or another loopback address at that port, reaches no listener.
      expect(await admitDestination(loopback, 'loop.test', 40_002, resolve)).toMatchObject({
        ok: true,
      });
      expect(await admitDestination(wide, 'other.test', 40_001, resolve)).toMatchObject({
        ok: true,
        address: '127.0.0.2',
      });
    } finally {
      release();
    }
    // Closed, the port is an ordinary loopback port again.
    expect(await admitDestination(loopback, 'loop.test', 40_001, resolve)).toMatchObject({
      ok: true,
    });
  });
});
