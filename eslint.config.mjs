import path from 'node:path';
import { fileURLToPath } from 'node:url';
import tseslint from 'typescript-eslint';

const ROOT = path.dirname(fileURLToPath(import.meta.url));

/** A glob of repository paths as a RegExp: `**` any depth, `*` within one segment. */
function globRegExp(glob) {
  const source = glob
    .split(/(\*\*\/|\*\*|\*)/)
    .map((part) =>
      part === '**/' ? '(?:.*/)?' : part === '**' ? '.*' : part === '*' ? '[^/]*' : part.replace(/[.+?^$()|[\]\\{}]/g, '\\$&'),
    )
    .join('');
  return new RegExp(`^${source}$`);
}

/**
 * The import levels, by where an import lands rather than how it is spelled: each relative import
 * is resolved against the importing file, so a rule holds at any folder depth. A zone forbids
 * the repository paths matching `forbid` unless they match `allow` (paths without extension;
 * `allowTypeImports` lets `import type` through).
 */
const levels = {
  meta: { type: 'problem', schema: [{ type: 'array' }] },
  create(context) {
    const zones = (context.options[0] ?? []).map((zone) => ({
      ...zone,
      forbid: zone.forbid.map(globRegExp),
      allow: (zone.allow ?? []).map(globRegExp),
    }));
    const check = (node, source, typeOnly) => {
      if (typeof source !== 'string' || !source.startsWith('.')) return;
      const resolved = path
        .relative(ROOT, path.resolve(path.dirname(context.filename), source))
        .split(path.sep)
        .join('/');
      const target = resolved.replace(/\.(?:ts|js)$/, '').replace(/\/index$/, '/index');
      for (const zone of zones) {
        if (!zone.forbid.some((re) => re.test(target)) || zone.allow.some((re) => re.test(target))) continue;
        if (zone.allowTypeImports && typeOnly) continue;
        context.report({ node, message: `${zone.message} (${source} is ${target})` });
      }
    };
    const typeOnly = (node) =>
      node.importKind === 'type' || (node.specifiers.length > 0 && node.specifiers.every((specifier) => specifier.importKind === 'type'));
    return {
      ImportDeclaration: (node) => check(node, node.source.value, typeOnly(node)),
      ExportNamedDeclaration: (node) => node.source && check(node, node.source.value, node.exportKind === 'type'),
      ExportAllDeclaration: (node) => check(node, node.source.value, node.exportKind === 'type'),
      ImportExpression: (node) => node.source.type === 'Literal' && check(node, node.source.value, false),
    };
  },
};
const LOCAL = { rules: { levels } };

/** The modules workflows may import: each feature's contract and its pure (deterministic) logic. */
const PURE_MODULES = [
  'src/*/contract',
  'src/app/temporal/contract',
  'src/app/utf8',
  'src/runs/state',
  'src/runs/completion',
  'src/runs/log-text',
  'src/slack/texts',
  'src/slack/progress',
  'src/slack/stream',
  'src/slack/stream-segments',
  'src/slack/assistant',
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

/**
 * The files of bench/ and test/harness/ that reach Temporal's workflows without the ingress
 * gateway, each with its reason; every other file there goes through the gateway.
 */
const DIRECT_TEMPORAL = {
  'bench/run.ts':
    'the raw-start ceiling starts `ping` with the client on purpose: it measures the engine without us; it also counts visibility and reads histories, which the gateway does not offer',
  'bench/runs-throughput.ts':
    "measures the run workflow's own throughput by signal-with-start from the client, without the front door, and reads its histories",
  'bench/chaos.ts': 'probes the engine with `ping` while it injects faults, and cancels and describes runs as the fault itself',
  'bench/fairness.ts': 'reads the histories of the workflows it measured',
  'bench/lib/stack.ts': "waits for a stack's worker by executing `ping` before any load starts",
  'test/harness/runs.ts': 'starts runs and reads their handles as test setup and inspection of the workflow itself',
  'test/harness/github.ts': "reads a delivery workflow's result and history as test inspection",
};

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
    // A workflow entry point, signal, query, update or activity keeps the argument shape its
    // recorded histories have; none of them takes more than three.
    files: ['src/**/*.ts', 'workflows/**/*.ts', 'activities/**/*.ts'],
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
      'test/harness/den-bin.ts',
      'bench/**',
      'scripts/**',
    ],
    rules: { 'no-restricted-properties': 'off' },
  },
  {
    // bench/ and test/harness/ reach Temporal's workflows through the gateway and import no
    // workflow code, but the files DIRECT_TEMPORAL names with their reasons.
    files: ['bench/**/*.ts', 'test/harness/**/*.ts'],
    ignores: Object.keys(DIRECT_TEMPORAL),
    rules: {
      'no-restricted-syntax': ['error', TEMPORAL_CLIENT],
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/workflows', '**/workflows/**'],
              message: 'Workflows are reached through the ingress gateway, by their contract refs.',
            },
          ],
        },
      ],
    },
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
    // arrow runs main → features → app. Any relative import that lands outside src/app/ is refused.
    files: ['src/app/**/*.ts'],
    plugins: { local: LOCAL },
    rules: { 'local/levels': ['error', [{ forbid: ['**'], allow: ['src/app/**'], message: APP_FLOOR }]] },
  },
  // A feature reaches another only through that feature's contract.ts or index.ts, and never
  // imports the composition root (src/main/), which is what imports the features.
  ...FEATURES.map((feature) => ({
    files: [`src/${feature}/**/*.ts`],
    plugins: { local: LOCAL },
    rules: {
      'local/levels': [
        'error',
        [
          {
            forbid: ['src/**'],
            allow: [`src/${feature}/**`, 'src/app/**', 'src/*/contract', 'src/*/index', ...FEATURES.map((other) => `src/${other}`)],
            message:
              'A feature imports src/app/, its own files, and another feature only through its contract.ts or index.ts; never src/main/ (docs/architecture.md).',
          },
        ],
      ],
    },
  })),
  {
    files: FEATURES.map((feature) => `src/${feature}/**/*.ts`),
    // Repeated from the src/** block above, which this one replaces for feature files.
    rules: { 'no-restricted-imports': ['error', { patterns: [RUNTIME_CLIENT, WORKER_CODE] }] },
  },
  {
    // Workflow code must be deterministic (docs/architecture.md): workflows import only their
    // features' contracts and pure modules, and activities only as types (the worker registers
    // them; a workflow proxies them).
    files: ['workflows/**/*.ts'],
    plugins: { local: LOCAL },
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: NODE_AND_IO, message: 'Workflows are deterministic: no I/O, no Node built-ins.' }] },
      ],
      'local/levels': [
        'error',
        [
          {
            forbid: ['**'],
            allow: ['workflows/**', 'activities/**', ...PURE_MODULES],
            message: 'Workflows import only contracts and pure modules (docs/architecture.md).',
          },
          { forbid: ['activities/**'], allowTypeImports: true, message: 'Workflows import activities as types only.' },
        ],
      ],
    },
  },
  {
    // What workflows import must itself stay pure: a contract or pure module imports only packages
    // without I/O and other pure modules (the bundle takes in everything they import).
    files: PURE_MODULES.map((m) => `${m}.ts`),
    plugins: { local: LOCAL },
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: NODE_AND_IO, message: 'Contracts and pure modules run inside workflows: no I/O.' }] },
      ],
      'local/levels': ['error', [{ forbid: ['**'], allow: PURE_MODULES, message: 'Contracts and pure modules import only each other.' }]],
    },
  },
);
