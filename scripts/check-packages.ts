// The publishability checks of `pnpm test`: for every published package, publint --strict,
// attw (ESM-only profile), and a standalone install of its packed tarball into an empty project
// outside the workspace, followed by an import — proving each layer installs on its own.
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '..');

interface Manifest {
  name: string;
  private?: boolean;
  dependencies?: Record<string, string>;
}

/** Packages a standalone install of a layer must never pull in (native builds, Redis clients). */
const forbiddenForCore = ['isolated-vm', 'ioredis', 'redis', 'execa'];

async function publishedPackages(): Promise<{ dir: string; manifest: Manifest }[]> {
  const dirs = await readdir(join(root, 'packages'));
  const found = await Promise.all(
    dirs.map(async (name) => {
      const dir = join(root, 'packages', name);
      const manifest = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as Manifest;
      return { dir, manifest };
    }),
  );
  return found.filter(({ manifest }) => !manifest.private);
}

async function step(label: string, command: string, args: string[], cwd: string): Promise<void> {
  try {
    await run(command, args, {
      cwd,
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, FORCE_COLOR: '0' },
    });
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
    throw new Error(`${label} failed:\n${stdout}\n${stderr}`);
  }
}

async function lint(dir: string, name: string): Promise<void> {
  await step(`publint ${name}`, 'pnpm', ['exec', 'publint', '--strict'], dir);
  await step(`attw ${name}`, 'pnpm', ['exec', 'attw', '--pack', '--profile', 'esm-only'], dir);
}

async function pack(dir: string, destination: string): Promise<string> {
  const { stdout } = await run('pnpm', ['pack', '--json', '--pack-destination', destination], {
    cwd: dir,
  });
  return (JSON.parse(stdout) as { filename: string }).filename;
}

async function installAlone(
  name: string,
  tarballs: Map<string, string>,
  workDir: string,
): Promise<void> {
  const project = await mkdtemp(join(workDir, 'install-'));
  const overrides = Object.fromEntries(
    [...tarballs]
      .filter(([other]) => other !== name)
      .map(([other, file]) => [other, `file:${file}`]),
  );
  await writeFile(
    join(project, 'package.json'),
    JSON.stringify({
      name: 'standalone-install-check',
      private: true,
      type: 'module',
      dependencies: { [name]: `file:${tarballs.get(name)}` },
      pnpm: { overrides, onlyBuiltDependencies: ['isolated-vm'] },
    }),
  );
  await step(
    `install ${name}`,
    'pnpm',
    ['install', '--ignore-workspace', '--prefer-offline'],
    project,
  );
  const probe = `const m = await import(${JSON.stringify(name)}); console.log(JSON.stringify(Object.keys(m)));`;
  await step(`import ${name}`, 'node', ['--input-type=module', '-e', probe], project);
  if (name === '@coda/sandbox-core') {
    const { stdout } = await run('pnpm', ['list', '--depth', 'Infinity', '--json'], {
      cwd: project,
    });
    const pulled = forbiddenForCore.filter((dependency) => stdout.includes(`"${dependency}"`));
    if (pulled.length > 0) throw new Error(`${name} pulled in ${pulled.join(', ')}`);
  }
}

async function main(): Promise<void> {
  const packages = await publishedPackages();
  const workDir = await mkdtemp(join(tmpdir(), 'coda-package-check-'));
  try {
    const tarballs = new Map<string, string>();
    for (const { dir, manifest } of packages) tarballs.set(manifest.name, await pack(dir, workDir));
    const results = await Promise.allSettled(
      packages.map(async ({ dir, manifest }) => {
        await lint(dir, manifest.name);
        await installAlone(manifest.name, tarballs, workDir);
        console.log(`ok  ${manifest.name}: publint, attw, standalone install and import`);
      }),
    );
    const failures = results.flatMap((result) =>
      result.status === 'rejected' ? [result.reason] : [],
    );
    for (const failure of failures)
      console.error(String(failure instanceof Error ? failure.message : failure));
    if (failures.length > 0) process.exitCode = 1;
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

await main();
