// Sizes in this project are UTF-8 bytes, the unit that crosses process and isolate boundaries;
// `string.length` counts UTF-16 units and under-counts non-ASCII text up to threefold.

/**
 * The number of bytes `value` takes in UTF-8. A lone surrogate counts 3 bytes, as the
 * replacement character it is encoded to.
 */
export function utf8ByteLength(value: string): number {
  let bytes = 0;
  for (let index = 0; index < value.length; index++) {
    const unit = value.charCodeAt(index);
    if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (unit >= 0xd800 && unit <= 0xdbff && isLowSurrogate(value.charCodeAt(index + 1))) {
      bytes += 4;
      index++;
    } else bytes += 3;
  }
  return bytes;
}

function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}

/**
 * The UTF-8 size of `JSON.stringify(value)`: what the value costs on a boundary.
 * `undefined` (and functions, symbols) serialise to nothing and count 0.
 * Throws as `JSON.stringify` does for BigInt values and cycles.
 */
export function jsonByteLength(value: unknown): number {
  const json = JSON.stringify(value) as string | undefined;
  return json === undefined ? 0 : utf8ByteLength(json);
}
