// The playground page: plain files from `src/page/` served as they are (no build step), under a
// content security policy that allows only this origin's script, style and images.
import { fileURLToPath } from 'node:url';
import { serveStatic } from '@hono/node-server/serve-static';
import type { Hono } from 'hono';
import { secureHeaders } from 'hono/secure-headers';
import type { DemoEnv } from './server-env.ts';

const pageDirectory = fileURLToPath(new URL('../page/', import.meta.url));

/** The files of the page, by URL path; anything else under `/` is a 404. */
const pageFiles = {
  '/': 'index.html',
  '/app.js': 'app.js',
  '/style.css': 'style.css',
  '/favicon.svg': 'favicon.svg',
  // Browsers ask for /favicon.ico whatever the page links; the SVG answers it too.
  '/favicon.ico': 'favicon.svg',
} as const;

const pageHeaders = secureHeaders({
  contentSecurityPolicy: {
    defaultSrc: ["'none'"],
    scriptSrc: ["'self'"],
    styleSrc: ["'self'"],
    connectSrc: ["'self'"],
    imgSrc: ["'self'", 'data:'],
    baseUri: ["'none'"],
    formAction: ["'none'"],
    frameAncestors: ["'none'"],
  },
  referrerPolicy: 'no-referrer',
});

/** Adds the page's routes (GET and HEAD) to `app`. */
export function addPageRoutes(app: Hono<DemoEnv>): void {
  for (const [path, file] of Object.entries(pageFiles)) {
    app.get(
      path,
      pageHeaders,
      serveStatic({
        root: pageDirectory,
        path: file,
        // A new version of the page is picked up on the next load, never served stale.
        onFound: (_path, c) => {
          c.header('cache-control', 'no-cache');
        },
      }),
    );
  }
}
