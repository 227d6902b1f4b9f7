import tseslint from 'typescript-eslint';

/** The modules workflows may import: each feature's contract and its pure (deterministic) logic. */
const PURE_MODULES = [
  'src/*/contract',
  'src/app/temporal/contract',
  'src/runs/state',
  'src/runs/log-text',
  'src/slack/texts',
  'src/github/delivery',
  'src/mcp/decide',
  'src/mcp/resolution',
  'src/mcp/types',
];
const NODE_AND_IO = [
  'node:*',
  'fs',
  'crypto',
  'http',
  'https',
  'net',
  'pg',
  'kysely',
  'undici',
  'koa',
  '@koa/*',
  '@temporalio/client',
  '@temporalio/activity',
  '@temporalio/worker',
];

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', '.data/**', '.tools/**', 'coverage/**', 'bench/results/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // The config module is the only reader of the environment.
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'Read configuration through src/app/config.ts.' },
      ],
    },
  },
  {
    files: ['src/app/config.ts', 'test/setup/**', 'test/harness/process.ts', 'bench/**', 'scripts/**'],
    rules: { 'no-restricted-properties': 'off' },
  },
  {
    files: ['bin/**/*.js', 'jest.config.js', 'jest.system.config.js'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Workflow code must be deterministic (docs/architecture.md): workflows import only their
    // features' contracts and pure modules, and activities only as types (the worker registers
    // them; a workflow proxies them).
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: NODE_AND_IO, message: 'Workflows are deterministic: no I/O, no Node built-ins.' },
            {
              group: ['../src/*/*', '../src/*/*/*', '../src/*/*/*/**', ...PURE_MODULES.map((m) => `!../${m}`)],
              message: 'Workflows import only contracts and pure modules (docs/architecture.md).',
            },
            { group: ['../activities', '../activities/*'], allowTypeImports: true, message: 'Workflows import activities as types only.' },
          ],
        },
      ],
    },
  },
  {
    // What workflows import must itself stay pure.
    files: PURE_MODULES.map((m) => `${m}.ts`),
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: NODE_AND_IO, message: 'Contracts and pure modules run inside workflows: no I/O.' },
            {
              group: ['../app/*', '../app/**', '!../app/temporal/contract', '../../app/**'],
              message: 'Contracts and pure modules import only each other.',
            },
          ],
        },
      ],
    },
  },
);
