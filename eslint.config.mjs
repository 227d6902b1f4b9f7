import tseslint from 'typescript-eslint';

/** The modules workflows may import: each feature's contract and its pure (deterministic) logic. */
const PURE_MODULES = [
  'src/*/contract',
  'src/app/temporal/contract',
  'src/runs/state',
  'src/runs/log-text',
  'src/slack/texts',
  'src/slack/progress',
  'src/slack/stream',
  'src/github/delivery',
  'src/mcp/decide',
  'src/mcp/resolution',
  'src/mcp/types',
];
/** The feature folders under src/. */
const FEATURES = ['slack', 'github', 'runs', 'mcp', 'identity'];
const APP_FLOOR = 'src/app/ is what every feature shares: it imports no feature, workflow, activity or src/main/ (docs/architecture.md).';
/** Only the composition root (src/main/) imports workflow modules and activities: it hands them to the worker. */
const WORKER_CODE = {
  group: ['**/workflows', '**/workflows/**', '**/activities', '**/activities/**'],
  message: 'Only src/main/ imports workflows/ and activities/ (src/main/worker-code.ts); a feature starts workflows by its contract refs.',
};
const RUNTIME_CLIENT = {
  group: ['**/cli/runtime', '**/cli/runtime/**'],
  message: 'Only the CLI (src/cli/) imports the reference runtime.',
};
const TEMPORAL_CLIENT = {
  selector: "MemberExpression[property.name='workflow']:matches([object.name='client'], [object.property.name='client'])",
  message: "Temporal's workflows are reached only through the ingress gateway (src/app/ingress.ts).",
};
const WORKFLOW_BY_STRING = {
  selector: "Property:matches([key.name='workflow'], [key.name='workflowType'])[value.type='Literal']",
  message: "A workflow is named by its contract's ref (workflowRef in the feature's contract.ts), never by a string.",
};
const WEAK_MAP = {
  selector: "NewExpression[callee.name='WeakMap']",
  message: 'Per-request state lives on ctx.state; a WeakMap keyed by the request (or anything else) hides it.',
};
const WORKFLOW_REF_OUTSIDE_CONTRACT = {
  selector: "CallExpression[callee.name='workflowRef']",
  message: "Workflow refs are defined once, in the feature's contract.ts.",
};
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
      // Settings are read in one place per process kind: the service, the cluster launcher, the CLI client.
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'Declare settings with defineSettings (src/app/settings.ts) and read them there.' },
      ],
    },
  },
  {
    // A function over 80 lines (blank lines and comments not counted) is split into named steps.
    files: ['src/**/*.ts', 'workflows/**/*.ts', 'activities/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }] },
  },
  {
    // More than three parameters become an options object, whose names say what each value is.
    files: ['src/github/**/*.ts'],
    rules: { 'max-params': ['error', 3] },
  },
  {
    files: [
      'src/app/config.ts',
      'src/main/config.ts',
      'src/cluster/settings.ts',
      'src/cli/runtime/settings.ts',
      'test/setup/**',
      'test/harness/process.ts',
      'bench/**',
      'scripts/**',
    ],
    rules: { 'no-restricted-properties': 'off' },
  },
  {
    files: ['bin/**/*.js', 'jest.config.js', 'jest.system.config.js'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // The reference runtime is a client of the API that only the CLI runs: the service never
    // imports it (it would ship a client inside the server). Nothing below the composition root
    // imports a workflow or an activity.
    files: ['src/**/*.ts'],
    ignores: ['src/cli/**'],
    rules: { 'no-restricted-imports': ['error', { patterns: [RUNTIME_CLIENT, WORKER_CODE] }] },
  },
  {
    files: ['src/cli/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [WORKER_CODE] }] },
  },
  {
    // The composition root wires the worker's code (src/main/worker-code.ts).
    files: ['src/main/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [RUNTIME_CLIENT] }] },
  },
  // Every call to Temporal's workflows goes through the ingress gateway and names its workflow by a
  // contract's ref, a ref is defined once, in its feature's contract, and per-request state lives
  // on ctx.state, never in a map keyed by the request. ESLint keeps one `no-restricted-syntax` per
  // file (the last block's), so each block below lists every rule that applies to its files.
  {
    files: ['src/**/*.ts', 'activities/**/*.ts'],
    ignores: ['src/app/ingress.ts', 'src/*/contract.ts', 'src/app/temporal/contract.ts'],
    rules: { 'no-restricted-syntax': ['error', TEMPORAL_CLIENT, WORKFLOW_BY_STRING, WEAK_MAP, WORKFLOW_REF_OUTSIDE_CONTRACT] },
  },
  {
    files: ['src/*/contract.ts', 'src/app/temporal/contract.ts'],
    rules: { 'no-restricted-syntax': ['error', TEMPORAL_CLIENT, WORKFLOW_BY_STRING, WEAK_MAP] },
  },
  {
    files: ['src/app/ingress.ts'],
    rules: { 'no-restricted-syntax': ['error', WORKFLOW_BY_STRING, WEAK_MAP, WORKFLOW_REF_OUTSIDE_CONTRACT] },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: { 'no-restricted-syntax': ['error', WORKFLOW_REF_OUTSIDE_CONTRACT] },
  },
  {
    // The ground floor names no feature: src/app/ imports only itself and packages, so every
    // arrow runs main → features → app. Any relative import that climbs out of src/app/ is refused.
    files: ['src/app/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['../*', '../**'], message: APP_FLOOR }] }] },
  },
  {
    files: ['src/app/*/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['../../*', '../../**'], message: APP_FLOOR }] }] },
  },
  {
    files: ['src/app/*/*/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['../../../*', '../../../**'], message: APP_FLOOR }] }] },
  },
  {
    // A feature reaches another only through that feature's contract.ts or index.ts, and never
    // imports the composition root (src/main/), which is what imports the features.
    files: FEATURES.map((feature) => `src/${feature}/**/*.ts`),
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: FEATURES.flatMap((feature) =>
                ['../', '../../'].flatMap((up) => [`${up}${feature}/*`, `!${up}${feature}/contract`, `!${up}${feature}/index`]),
              ),
              message: 'Another feature is reached only through its contract.ts or index.ts (docs/architecture.md).',
            },
            {
              group: ['../main', '../main/*', '../../main', '../../main/*'],
              message: 'Features never import the composition root (src/main/).',
            },
            // Repeated from the block above, which this one replaces for feature files.
            RUNTIME_CLIENT,
            WORKER_CODE,
          ],
        },
      ],
    },
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
              // The folder of a nested pure module is let in first: a file cannot be let in under an excluded folder.
              group: ['../src/*/*', '../src/*/*/*', '../src/*/*/*/**', '!../src/app/temporal', ...PURE_MODULES.map((m) => `!../${m}`)],
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
              group: ['../app/*', '../app/**', '!../app/temporal', '!../app/temporal/contract', '../../app/**'],
              message: 'Contracts and pure modules import only each other.',
            },
          ],
        },
      ],
    },
  },
);
