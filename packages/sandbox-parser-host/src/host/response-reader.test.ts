import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ResponseReader } from './response-reader.ts';

const nonce = randomBytes(32);

function frame(body: string, secret = nonce): Buffer {
  const bytes = Buffer.from(body);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return Buffer.concat([secret, length, bytes]);
}

function feed(reader: ResponseReader, bytes: Buffer, step: number) {
  let state = reader.state;
  for (let at = 0; at < bytes.length; at += step)
    state = reader.push(bytes.subarray(at, at + step));
  return state;
}

describe('ResponseReader', () => {
  const genuine = frame('{"ok":true,"data":[1,"two"]}');
  const stream = Buffer.concat([
    Buffer.from([1]),
    Buffer.from('garbage'),
    frame('{"ok":true,"data":"forged"}', randomBytes(32)),
    nonce.subarray(0, 31),
    genuine,
    Buffer.from('trailing bytes are ignored'),
  ]);

  it('finds the genuine frame behind forged ones, whatever the chunking', () => {
    for (const step of [1, 2, 7, 31, 32, 33, 1000]) {
      const reader = new ResponseReader(nonce, 1024);
      expect(feed(reader, stream, step)).toEqual({
        kind: 'complete',
        response: { ok: true, data: [1, 'two'] },
      });
    }
  });

  it('says when the runner is ready', () => {
    let ready = 0;
    const reader = new ResponseReader(nonce, 1024, () => ready++);
    reader.push(Buffer.from([1]));
    expect(reader.ready).toBe(true);
    expect(ready).toBe(1);
  });

  it('refuses a channel that does not start with the ready byte', () => {
    const reader = new ResponseReader(nonce, 1024);
    expect(reader.push(Buffer.from('x'))).toMatchObject({ kind: 'refused', reason: 'malformed' });
  });

  it('refuses a declared length over the cap without buffering it', () => {
    const reader = new ResponseReader(nonce, 10);
    const header = Buffer.concat([Buffer.from([1]), nonce, Buffer.from([0x7f, 0, 0, 0])]);
    expect(reader.push(header)).toEqual({
      kind: 'refused',
      reason: 'too-large',
      message: 'parser response is 2130706432 bytes, over maxOutputBytes (10)',
    });
  });

  it('refuses malformed and wrongly shaped bodies', () => {
    for (const body of ['not json', '[1]', '{"ok":true}', '{"ok":false,"error":"x"}']) {
      const reader = new ResponseReader(nonce, 1024);
      expect(feed(reader, Buffer.concat([Buffer.from([1]), frame(body)]), 5).kind).toBe('refused');
    }
  });

  it('accepts every error kind', () => {
    const reader = new ResponseReader(nonce, 1024);
    const body = '{"ok":false,"error":"Unknown parser: x","kind":"unknown-parser"}';
    expect(feed(reader, Buffer.concat([Buffer.from([1]), frame(body)]), 3)).toEqual({
      kind: 'complete',
      response: { ok: false, error: 'Unknown parser: x', kind: 'unknown-parser' },
    });
  });
});
