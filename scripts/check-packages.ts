// The publishability checks of `pnpm test`: for every published package, publint --strict,
// attw (ESM-only profile), the exact list of files in its tarball, and a standalone install of
// the tarball into an empty project outside the workspace, followed by an import — proving each
// layer installs on its own. (apps/registry-round-trip goes further: a registry, npm, the
// README examples.)
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { glob, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
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

interface Packed {
  filename: string;
  files: { path: string }[];
}

async function pack(dir: string, destination: string): Promise<Packed> {
  const { stdout } = await run('pnpm', ['pack', '--json', '--pack-destination', destination], {
    cwd: dir,
  });
  return JSON.parse(stdout) as Packed;
}

/** What each TypeScript source contributes to `dist/`. */
const builtFrom = ['.js', '.js.map', '.d.ts', '.d.ts.map'];

/**
 * The files a package's tarball must hold, no more and no less: the manifest, README, LICENSE,
 * CHANGELOG.md once versioning made one, every non-test source and exactly its build output,
 * and the Python sources that ship unbuilt
 * (so a stale `dist/` file of a deleted source, a test or a build-info file fails the check).
 */
async function expectedFiles(dir: string): Promise<string[]> {
  const fixed = ['package.json', 'README.md', 'LICENSE'];
  if (existsSync(join(dir, 'CHANGELOG.md'))) fixed.push('CHANGELOG.md');
  const sources: string[] = [];
  for await (const path of glob('src/**/*.ts', { cwd: dir })) {
    if (!/\.test\./.test(path)) sources.push(path);
  }
  const built = sources.flatMap((source) =>
    builtFrom.map((suffix) => source.replace(/^src\//, 'dist/').replace(/\.ts$/, suffix)),
  );
  // Programs in other languages that ship as they are (the parser host's Python runner).
  const shipped: string[] = [];
  for await (const path of glob('src/**/*.py', { cwd: dir })) shipped.push(path);
  return [...fixed, ...sources, ...built, ...shipped].sort();
}

async function checkFiles(dir: string, name: string, packed: Packed): Promise<void> {
  const actual = packed.files.map((file) => file.path).sort();
  const expected = await expectedFiles(dir);
  const extra = actual.filter((path) => !expected.includes(path));
  const missing = expected.filter((path) => !actual.includes(path));
  if (extra.length > 0 || missing.length > 0) {
    throw new Error(
      `${name} tarball files differ from the expected list:\n` +
        `  not expected: ${extra.join(', ') || '-'}\n  missing: ${missing.join(', ') || '-'}\n` +
        '  (a dist/ file without a source is left from a deleted one: remove dist/ and build)',
    );
  }
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
    const packed = new Map<string, Packed>();
    for (const { dir, manifest } of packages) {
      const result = await pack(dir, workDir);
      packed.set(manifest.name, result);
      tarballs.set(manifest.name, result.filename);
    }
    const results = await Promise.allSettled(
      packages.map(async ({ dir, manifest }) => {
        await checkFiles(dir, manifest.name, packed.get(manifest.name) as Packed);
        await lint(dir, manifest.name);
        await installAlone(manifest.name, tarballs, workDir);
        console.log(`ok  ${manifest.name}: files, publint, attw, standalone install and import`);
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
