// Run by system-lookup.test.ts in private mount and network namespaces whose /etc/resolv.conf
// names 127.0.0.77, where this script answers DNS itself: `a.test` has the A record 192.0.2.10
// and no other; every query for another name is dropped, as a server that never answers. Prints one JSON line.
import { createSocket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import { systemLookup } from '../../src/network/system-lookup.ts';

const server = createSocket('udp4');
server.on('message', (query, peer) => {
  // The question starts at byte 12 and ends after its name's zero byte, type and class.
  let end = 12;
  while ((query[end] ?? 0) !== 0) end += (query[end] ?? 0) + 1;
  end += 5;
  const name = query.subarray(13, end - 5).toString('latin1');
  const type = query.readUInt16BE(end - 4);
  if (!name.startsWith('a\x04test')) return; // dropped: no answer ever
  // A: one record; any other type: none (NODATA), as a real server answers.
  const records = type === 1 ? 1 : 0;
  const header = Buffer.from([0, 0, 0x81, 0x80, 0, 1, 0, records, 0, 0, 0, 0]);
  query.copy(header, 0, 0, 2); // the query's id
  const answer = Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 10]);
  const reply = [header, query.subarray(12, end), ...(records === 1 ? [answer] : [])];
  server.send(Buffer.concat(reply), peer.port, peer.address);
});
await new Promise<void>((resolve) => server.bind(53, '127.0.0.77', resolve));

const answered = await systemLookup('a.test');
const fromHostsFile = await systemLookup('localhost');
// Twenty lookups the server never answers, then a getaddrinfo lookup of the process's own.
const controller = new AbortController();
const stalled = Array.from({ length: 20 }, (_, i) =>
  systemLookup(`n${i}.slow.test`, controller.signal).then(
    () => 'answered',
    (error: Error) => error.name,
  ),
);
await new Promise((resolve) => setTimeout(resolve, 200));
let started = performance.now();
await lookup('localhost');
const getaddrinfoMs = performance.now() - started;
started = performance.now();
controller.abort();
const outcomes = [...new Set(await Promise.all(stalled))];
const abortMs = performance.now() - started;
server.close();
console.log(JSON.stringify({ answered, fromHostsFile, getaddrinfoMs, outcomes, abortMs }));
