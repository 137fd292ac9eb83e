// A real npm registry on loopback: Verdaccio in this process with a temp storage dir. It holds
// the @coda packages published to it and nothing else of that scope; every other name is fetched
// from the registry npm is configured with (an uplink), so an install resolves third-party
// dependencies the way a user's would.
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { runServer } from 'verdaccio';

const run = promisify(execFile);

/** A running registry this process started. */
export interface LocalRegistry {
  /** `http://127.0.0.1:PORT/` */
  readonly url: string;
  /** A token of the one user allowed to publish. */
  readonly token: string;
  /** An `.npmrc` line that authenticates publishes with `token`. */
  readonly authLine: string;
  stop(): Promise<void>;
}

const user = { name: 'coda-round-trip', password: 'round-trip-only' };

/** The registry npm itself uses here (a mirror if one is configured), as Verdaccio's uplink. */
async function upstreamRegistry(): Promise<string> {
  const { stdout } = await run('npm', ['config', 'get', 'registry']);
  return stdout.trim() || 'https://registry.npmjs.org/';
}

function configuration(dir: string, upstream: string | undefined) {
  if (upstream === undefined) {
    // Nothing beyond loopback: only what is published here resolves.
    return {
      storage: join(dir, 'storage'),
      auth: { htpasswd: { file: join(dir, 'htpasswd'), max_users: 1 } },
      packages: { '**': { access: '$all', publish: '$authenticated' } },
      log: { type: 'stdout', format: 'pretty', level: 'error' },
      web: { enable: false },
    };
  }
  return {
    storage: join(dir, 'storage'),
    auth: { htpasswd: { file: join(dir, 'htpasswd'), max_users: 1 } },
    // Verdaccio marks an uplink offline after max_fails failed requests (default 2, for 5 min):
    // allow a few transient failures, and retry it soon.
    uplinks: {
      upstream: { url: upstream, timeout: '60s', maxage: '30m', max_fails: 5, fail_timeout: '5s' },
    },
    packages: {
      // No proxy: an @coda name resolves only to what the test published.
      '@coda/*': { access: '$all', publish: '$authenticated' },
      '**': { access: '$all', proxy: 'upstream' },
    },
    log: { type: 'stdout', format: 'pretty', level: 'error' },
    web: { enable: false },
  };
}

async function createUser(url: string): Promise<string> {
  const response = await fetch(new URL(`-/user/org.couchdb.user:${user.name}`, url), {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(user),
  });
  const body = (await response.json()) as { token?: string; error?: string };
  if (!response.ok || body.token === undefined) {
    throw new Error(`cannot create the registry user: ${response.status} ${body.error ?? ''}`);
  }
  return body.token;
}

/**
 * Starts Verdaccio on a free loopback port with its storage under `dir`; with `uplink: false`
 * it fetches nothing from another registry.
 */
export async function startRegistry(dir: string, { uplink = true } = {}): Promise<LocalRegistry> {
  // JSON is YAML: Verdaccio reads it as its config file, and paths in it are absolute.
  const configPath = join(dir, 'config.yaml');
  const upstream = uplink ? await upstreamRegistry() : undefined;
  await writeFile(configPath, JSON.stringify(configuration(dir, upstream)));
  const server = (await runServer(configPath)) as Server;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}/`;
  const token = await createUser(url);
  return {
    url,
    token,
    authLine: `//127.0.0.1:${port}/:_authToken=${token}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
