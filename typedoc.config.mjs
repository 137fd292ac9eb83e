// API reference for every published package; `pnpm docs` writes it to api-docs/ (git-ignored).
import { fileURLToPath } from 'node:url';

/** @type {Partial<import('typedoc').TypeDocOptions>} */
export default {
  name: 'Coda Sandbox',
  entryPointStrategy: 'packages',
  entryPoints: ['packages/*'],
  out: 'api-docs',
  readme: 'README.md',
  excludePrivate: true,
  excludeInternal: true,
  packageOptions: {
    // Links to the sources on GitHub's main branch; without a template typedoc asks git for a
    // remote, and a checkout without one (CI, a fresh clone's fork) breaks every source link.
    sourceLinkTemplate:
      'https://github.com/coda-sandbox/coda-sandbox/blob/{gitRevision}/{path}#L{line}',
    gitRevision: 'main',
  },
  // A warning is a broken page or link, or (from the plugin) a page without a name or a field
  // without a doc comment: fail `pnpm docs` instead of printing it.
  treatWarningsAsErrors: true,
  plugin: [fileURLToPath(new URL('./scripts/typedoc-checks.mjs', import.meta.url))],
};
