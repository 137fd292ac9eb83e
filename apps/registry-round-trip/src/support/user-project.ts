// A new user's project: an empty directory with a package.json, where plain npm installs from
// the local registry and plain node runs what a README says.
import { chmod, mkdtemp, writeFile } from 'node:fs/promises';
import { delimiter, dirname, join, resolve } from 'node:path';
import { run } from './release.ts';

/**
 * The environment of a user's shell: this Node first on PATH (npm runs on it), nothing a
 * package manager running this test set (`npm_*`, `PNPM_*`; `npm_config_nodedir`, which points
 * node-gyp at this Node's headers, stays), and `extra` (such as REDIS_URL).
 */
export function userEnvironment(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([key]) => key === 'npm_config_nodedir' || !/^(npm_|pnpm_)/i.test(key),
    ),
  );
  return {
    ...env,
    PATH: [dirname(process.execPath), process.env.PATH].join(delimiter),
    NODE_OPTIONS: '',
    ...extra,
  };
}

export interface UserProject {
  readonly dir: string;
  /** `npm install NAMES` from the registry. */
  install(names: readonly string[]): Promise<void>;
  /** Saves `code` as `file` in the project. */
  save(file: string, code: string): Promise<void>;
  /** `node FILE`; rejects with the output unless it exits 0. */
  node(file: string): Promise<{ stdout: string; stderr: string }>;
  /** `tsc --noEmit` over the project's .ts files, strict; rejects with the errors. */
  typecheck(): Promise<void>;
}

/** The repository's TypeScript and Node types, standing in for the reader's dev dependencies. */
const repositoryModules = resolve(import.meta.dirname, '../../../../node_modules');

const strictProject = {
  compilerOptions: {
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'es2024',
    lib: ['es2024', 'esnext.disposable'],
    types: ['node'],
    typeRoots: [join(repositoryModules, '@types')],
    noEmit: true,
    skipLibCheck: true,
  },
  include: ['*.ts'],
};

/**
 * A project in a new directory under `parent`. npm's cache is `cache`, one per test run: every
 * tarball comes from the registry as on a new machine, and the user's own cache stays clean.
 */
export async function createUserProject(
  parent: string,
  registryUrl: string,
  cache: string,
  env: NodeJS.ProcessEnv,
): Promise<UserProject> {
  const dir = await mkdtemp(join(parent, 'project-'));
  // As `mkdir` makes a directory, not mkdtemp's 0700: on a root host the parser host's child
  // runs as uid 65534 and must read the runner in node_modules and the parser module.
  await chmod(dir, 0o755);
  await writeFile(
    join(dir, 'package.json'),
    `${JSON.stringify({ name: 'new-user-project', private: true, type: 'module' }, null, 2)}\n`,
  );
  return {
    dir,
    install: async (names) => {
      await run(
        'npm',
        [
          'install',
          '--registry',
          registryUrl,
          '--cache',
          cache,
          '--no-audit',
          '--no-fund',
          ...names,
        ],
        { cwd: dir, env, timeout: 180_000 },
      );
    },
    save: (file, code) => writeFile(join(dir, file), code),
    node: (file) => run(process.execPath, [file], { cwd: dir, env, timeout: 60_000 }),
    typecheck: async () => {
      await writeFile(join(dir, 'tsconfig.json'), JSON.stringify(strictProject));
      const tsc = join(repositoryModules, 'typescript', 'bin', 'tsc');
      await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: dir, env });
    },
  };
}
