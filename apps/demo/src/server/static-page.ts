// The playground page: three plain files read once at start-up and served as they are (no build
// step), under a content security policy that allows only this origin's script and style.
import { readFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';

interface PageFile {
  body: Buffer;
  type: string;
}

/** The page's files by URL path. */
export type PageFiles = ReadonlyMap<string, PageFile>;

const pageDirectory = new URL('../page/', import.meta.url);

const files = [
  ['/', 'index.html', 'text/html; charset=utf-8'],
  ['/app.js', 'app.js', 'text/javascript; charset=utf-8'],
  ['/style.css', 'style.css', 'text/css; charset=utf-8'],
] as const;

/** Reads the page's files from `src/page/`. */
export async function loadPageFiles(): Promise<PageFiles> {
  const entries = await Promise.all(
    files.map(
      async ([path, name, type]) =>
        [path, { body: await readFile(new URL(name, pageDirectory)), type }] as const,
    ),
  );
  return new Map(entries);
}

/** Sends the file for `path`; false when there is none. */
export function sendPageFile(response: ServerResponse, pages: PageFiles, path: string): boolean {
  const file = pages.get(path);
  if (file === undefined) return false;
  response.writeHead(200, {
    'content-type': file.type,
    'content-length': file.body.byteLength,
    'cache-control': 'no-cache',
    'content-security-policy':
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
  });
  response.end(file.body);
  return true;
}
