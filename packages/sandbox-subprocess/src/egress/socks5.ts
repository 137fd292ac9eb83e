// SOCKS5 (RFC 1928), CONNECT only and no authentication: the greeting, one request naming a host
// (or an address, which the policy must name), then the tunnel as for HTTP CONNECT.
import type { Socket } from 'node:net';
import type { Admitted, EgressSession } from './egress-session.ts';

/** Reply codes: 0 success, 2 not allowed by ruleset, 4 host unreachable, 7 command not supported, 8 address type not supported. */
function reply(code: number): Buffer {
  return Buffer.from([0x05, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);
}

/** Reads exactly what it needs from the socket, buffering the rest. */
class Reader {
  #data: Buffer;
  #waiting: (() => void) | undefined;
  #closed = false;
  readonly socket: Socket;

  constructor(socket: Socket, first: Buffer) {
    this.socket = socket;
    this.#data = first;
    socket.on('data', (chunk: Buffer) => {
      this.#data = Buffer.concat([this.#data, chunk]);
      if (this.#data.length > 600) socket.destroy(); // a greeting and a request fit in 600 bytes
      this.#waiting?.();
    });
    socket.once('close', () => {
      this.#closed = true;
      this.#waiting?.();
    });
    socket.resume();
  }

  async take(count: number): Promise<Buffer | undefined> {
    while (this.#data.length < count) {
      if (this.#closed) return undefined;
      await new Promise<void>((resolve) => {
        this.#waiting = resolve;
      });
      this.#waiting = undefined;
    }
    const out = this.#data.subarray(0, count);
    this.#data = this.#data.subarray(count);
    return out;
  }

  /** Stops reading; returns what was buffered beyond the request. */
  release(): Buffer {
    this.socket.removeAllListeners('data');
    this.socket.pause();
    return this.#data;
  }
}

/** Runs the SOCKS5 handshake, admits the destination and hands the tunnel to `tunnel`. */
export async function handleSocks(
  session: EgressSession,
  socket: Socket,
  first: Buffer,
  tunnel: (admitted: Admitted, head: Buffer, port: number) => Promise<void>,
): Promise<void> {
  const reader = new Reader(socket, first);
  const greeting = await reader.take(2);
  if (greeting === undefined) return;
  const methods = await reader.take(greeting[1] ?? 0);
  if (methods === undefined) return;
  if (!methods.includes(0x00)) {
    session.deny('(socks5)', 0, 'protocol', 'SOCKS5 without the no-authentication method');
    socket.end(Buffer.from([0x05, 0xff]));
    return;
  }
  socket.write(Buffer.from([0x05, 0x00]));
  const header = await reader.take(4);
  if (header === undefined) return;
  const [version, command, , type] = header;
  let host: string;
  if (type === 0x01) {
    const bytes = await reader.take(4);
    if (bytes === undefined) return;
    host = [...bytes].join('.');
  } else if (type === 0x03) {
    const length = await reader.take(1);
    const name = length === undefined ? undefined : await reader.take(length[0] ?? 0);
    if (name === undefined) return;
    host = name.toString('latin1');
  } else if (type === 0x04) {
    const bytes = await reader.take(16);
    if (bytes === undefined) return;
    const groups: string[] = [];
    for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i).toString(16));
    host = groups.join(':');
  } else {
    session.deny('(socks5)', 0, 'protocol', `SOCKS5 address type ${type}`);
    socket.end(reply(0x08));
    return;
  }
  const portBytes = await reader.take(2);
  if (portBytes === undefined) return;
  const port = portBytes.readUInt16BE(0);
  if (version !== 0x05 || command !== 0x01) {
    session.deny(host, port, 'protocol', `SOCKS5 command ${command} (only CONNECT is supported)`);
    socket.end(reply(0x07));
    return;
  }
  // The request is whole: the handshake's timeout is over (admission has its own bounds).
  socket.setTimeout(0);
  const admitted = await session.admit(host, port);
  if (!admitted.ok) {
    socket.end(reply(0x02));
    return;
  }
  const head = reader.release();
  socket.write(reply(0x00));
  await tunnel(admitted, head, port);
}
