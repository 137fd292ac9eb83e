import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { maxResponseDepth, ResponseReader } from './response-reader.ts';

const nonce = randomBytes(32);

function frame(body: string, secret = nonce): Buffer {
  const bytes = Buffer.from(body);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return Buffer.concat([secret, length, bytes]);
}

const readyNotice = frame('');

function feed(reader: ResponseReader, bytes: Buffer, step: number) {
  let state = reader.state;
  for (let at = 0; at < bytes.length; at += step)
    state = reader.push(bytes.subarray(at, at + step));
  return state;
}

describe('ResponseReader', () => {
  const stream = Buffer.concat([
    Buffer.from('garbage before the ready notice'),
    readyNotice,
    frame('{"ok":true,"data":"forged"}', randomBytes(32)),
    nonce.subarray(0, 31),
    frame('{"ok":true,"data":[1,"two"]}'),
    Buffer.from('trailing bytes are ignored'),
  ]);

  it('finds the genuine frames behind forged ones, whatever the chunking', () => {
    for (const step of [1, 2, 7, 31, 32, 33, 36, 1000]) {
      let ready = 0;
      const reader = new ResponseReader(nonce, 1024, () => ready++);
      expect(feed(reader, stream, step)).toEqual({
        kind: 'complete',
        response: { ok: true, data: [1, 'two'] },
      });
      expect(ready).toBe(1);
    }
  });

  it('a forged ready notice (wrong nonce) is not ready', () => {
    const reader = new ResponseReader(nonce, 1024);
    reader.push(frame('', randomBytes(32)));
    expect(reader.ready).toBe(false);
    reader.push(readyNotice);
    expect(reader.ready).toBe(true);
  });

  it('refuses a response nested deeper than maxResponseDepth before parsing it', () => {
    const nested = (depth: number) =>
      `{"ok":true,"data":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`;
    // The envelope is one level: data arrays to maxResponseDepth in all are still parsed.
    const atLimit = new ResponseReader(nonce, 16 * 1024 * 1024);
    expect(
      atLimit.push(Buffer.concat([readyNotice, frame(nested(maxResponseDepth))])),
    ).toMatchObject({ kind: 'complete' });
    // 4 000 000 levels in 8 MB: JSON.parse alone held the host about 1.4 s.
    const deep = new ResponseReader(nonce, 16 * 1024 * 1024);
    const started = performance.now();
    expect(deep.push(Buffer.concat([readyNotice, frame(nested(4_000_000))]))).toEqual({
      kind: 'refused',
      reason: 'malformed',
      message: `the response is nested deeper than ${maxResponseDepth} levels`,
    });
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('refuses a second ready notice', () => {
    const reader = new ResponseReader(nonce, 1024);
    expect(reader.push(Buffer.concat([readyNotice, readyNotice]))).toMatchObject({
      kind: 'refused',
      reason: 'malformed',
    });
  });

  it('refuses a declared length over the cap without buffering it', () => {
    const reader = new ResponseReader(nonce, 10);
    const header = Buffer.concat([nonce, Buffer.from([0x7f, 0, 0, 0])]);
    expect(reader.push(header)).toEqual({
      kind: 'refused',
      reason: 'too-large',
      message: 'parser response is 2130706432 bytes, over maxOutputBytes (10)',
    });
  });

  it('refuses a flood of bytes that hold no nonce, keeping only a short tail', () => {
    const reader = new ResponseReader(nonce, 1000);
    expect(reader.push(Buffer.alloc(900, 0x41)).kind).toBe('reading');
    expect(reader.push(Buffer.alloc(200, 0x41))).toMatchObject({ kind: 'refused' });
  });

  it('refuses malformed and wrongly shaped bodies', () => {
    for (const body of ['not json', '[1]', '{"ok":true}', '{"ok":false,"error":"x"}']) {
      const reader = new ResponseReader(nonce, 1024);
      expect(feed(reader, frame(body), 5).kind).toBe('refused');
    }
  });

  it('accepts an error response', () => {
    const reader = new ResponseReader(nonce, 1024);
    const body = '{"ok":false,"error":"Unknown parser: x","kind":"unknown-parser"}';
    expect(feed(reader, frame(body), 3)).toEqual({
      kind: 'complete',
      response: { ok: false, error: 'Unknown parser: x', kind: 'unknown-parser' },
    });
  });

  it('refuses, unparsed, a response whose shape would cost the host over its budget', () => {
    // What only a child that stole the nonce could send (the runner refuses it first): 100 000
    // empty objects are 300 kB of JSON, about 6 MB of heap; the budget at 256 KiB is
    // 8 × (256 KiB + 128 KiB) = 3 145 728 bytes.
    const body = `{"ok":true,"data":[${Array(100_000).fill('{}').join(',')}]}`;
    const reader = new ResponseReader(nonce, 256 * 1024);
    expect(feed(reader, frame(body), 65_536)).toEqual({
      kind: 'refused',
      reason: 'too-large',
      message: `parser result would take over 3145728 bytes of host memory once parsed (8 × (maxOutputBytes + 131072)): too many small values for its ${body.length} characters`,
    });
    // The same bytes as one string are well within the budget.
    const flat = new ResponseReader(nonce, 256 * 1024);
    const text = `{"ok":true,"data":"${'x'.repeat(body.length - 21)}"}`;
    expect(feed(flat, frame(text), 65_536).kind).toBe('complete');
  });
});
