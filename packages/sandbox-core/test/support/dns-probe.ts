// Run by system-lookup.test.ts in private mount and network namespaces whose /etc/resolv.conf
// names 127.0.0.77, where this script answers DNS itself: `a.test` has the A record 192.0.2.10
// and no other, `dual.test` the A record 192.0.2.20 and the AAAA record 2001:db8::20; every
// query for another name is dropped, as a server that never answers. Prints one JSON line.
import { createSocket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import { systemLookup } from '../../src/network/system-lookup.ts';

/** Each name's records by query type (1: A, 28: AAAA), as record data. */
const zone: Record<string, Record<number, number[]>> = {
  'a.test': { 1: [192, 0, 2, 10] },
  'dual.test': {
    1: [192, 0, 2, 20],
    28: [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20],
  },
};

const server = createSocket('udp4');
server.on('message', (query, peer) => {
  // The question starts at byte 12 and ends after its name's zero byte, type and class.
  const labels: string[] = [];
  let end = 12;
  while ((query[end] ?? 0) !== 0) {
    const length = query[end] ?? 0;
    labels.push(query.subarray(end + 1, end + 1 + length).toString('latin1'));
    end += length + 1;
  }
  end += 5;
  const type = query.readUInt16BE(end - 4);
  const records = zone[labels.join('.')];
  if (records === undefined) return; // dropped: no answer ever
  // The record of the type asked for, or none (NODATA), as a real server answers.
  const data = records[type];
  const header = Buffer.from([0, 0, 0x81, 0x80, 0, 1, 0, data === undefined ? 0 : 1, 0, 0, 0, 0]);
  query.copy(header, 0, 0, 2); // the query's id
  const answer =
    data === undefined
      ? []
      : [Buffer.from([0xc0, 12, 0, type, 0, 1, 0, 0, 0, 60, 0, data.length, ...data])];
  server.send(Buffer.concat([header, query.subarray(12, end), ...answer]), peer.port, peer.address);
});
await new Promise<void>((resolve) => server.bind(53, '127.0.0.77', resolve));

const answered = await systemLookup('a.test');
const dual = await systemLookup('dual.test');
const fromHostsFile = await systemLookup('localhost');
// Aborted while the hosts file is read: no query may go out, so it ends at once.
const early = new AbortController();
let started = performance.now();
const earlyOutcome = await new Promise<string>((resolve) => {
  systemLookup('late.slow.test', early.signal).then(
    () => resolve('answered'),
    (error: Error) => resolve(error.name),
  );
  queueMicrotask(() => early.abort());
});
const earlyAbortMs = performance.now() - started;
// Twenty lookups the server never answers, then a getaddrinfo lookup of the process's own.
const controller = new AbortController();
const stalled = Array.from({ length: 20 }, (_, i) =>
  systemLookup(`n${i}.slow.test`, controller.signal).then(
    () => 'answered',
    (error: Error) => error.name,
  ),
);
await new Promise((resolve) => setTimeout(resolve, 200));
started = performance.now();
await lookup('localhost');
const getaddrinfoMs = performance.now() - started;
started = performance.now();
controller.abort();
const outcomes = [...new Set(await Promise.all(stalled))];
const abortMs = performance.now() - started;
server.close();
console.log(
  JSON.stringify({
    answered,
    dual,
    fromHostsFile,
    earlyOutcome,
    earlyAbortMs,
    getaddrinfoMs,
    outcomes,
    abortMs,
  }),
);
