// API reference for every published package; `pnpm docs` writes it to api-docs/ (git-ignored).
/** @type {Partial<import('typedoc').TypeDocOptions>} */
export default {
  name: 'Coda Sandbox',
  entryPointStrategy: 'packages',
  entryPoints: ['packages/*'],
  out: 'api-docs',
  readme: 'README.md',
  excludePrivate: true,
  excludeInternal: true,
};
