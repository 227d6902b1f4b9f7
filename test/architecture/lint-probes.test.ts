/**
 * The lint rules that hold the import levels and the workflows' determinism hold at any folder
 * depth: each is shown a probe file, placed deeper than any file of today, that breaks it (and
 * one beside it that keeps it). So does the cap of three parameters, in every folder it covers.
 * ESLint runs with the repository's own eslint.config.mjs; the probes are linted as text under
 * the paths given, nothing is written.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');

/**
 * ESLint in a Node process of its own: its config is an ES module, which Jest's module system
 * cannot load. It reads the probes as JSON and prints each one's rule ids.
 */
const LINT_PROBES = `
import { ESLint } from 'eslint';
const probes = JSON.parse(await new Response(process.stdin).text());
const eslint = new ESLint({ cwd: process.cwd() });
const out = [];
for (const { file, code } of probes) {
  const [result] = await eslint.lintText(code, { filePath: file });
  out.push(result.messages.map((m) => m.ruleId ?? m.message));
}
process.stdout.write(JSON.stringify(out));
`;

/** The rule ids ESLint reports for each probe, `file` relative to the root. */
function reportedAll(probes: { file: string; code: string }[]): string[][] {
  const input = JSON.stringify(probes.map(({ file, code }) => ({ file: path.join(root, file), code })));
  const output = execFileSync(process.execPath, ['--input-type=module', '-e', LINT_PROBES], { cwd: root, input, encoding: 'utf8' });
  return JSON.parse(output) as string[][];
}

const imports = (from: string) => `import * as other from '${from}';\nexport const x = other;\n`;
const WORKFLOW = 'workflows/slack/answer/probe.ts';
const APP = 'src/app/http/middleware/deep/probe.ts';
const FEATURE = 'src/slack/routes/deep/nested/probe.ts';
const DIRECT =
  "import { ping } from '../../workflows/ping';\nexport const x = (client: { workflow: { start(f: unknown): void } }) => client.workflow.start(ping);\n";

/** Each probe: where it stands, what it imports, and the rules that must fail on it (none: it keeps them). */
const PROBES: { name: string; file: string; code: string; fails: string[] }[] = [
  { name: 'workflow → a store module', file: WORKFLOW, code: imports('../../../src/slack/connections'), fails: ['local/levels'] },
  { name: 'workflow → activities, as values', file: WORKFLOW, code: imports('../../../activities/slack'), fails: ['local/levels'] },
  { name: 'workflow → node:fs', file: WORKFLOW, code: imports('node:fs'), fails: ['no-restricted-imports'] },
  { name: 'workflow → a contract', file: WORKFLOW, code: imports('../../../src/slack/contract'), fails: [] },
  { name: 'workflow → a pure module', file: WORKFLOW, code: imports('../../../src/slack/texts'), fails: [] },
  {
    name: 'workflow → activities, as types',
    file: WORKFLOW,
    code: "import type { SlackActivities } from '../../../activities/slack';\nexport type X = SlackActivities;\n",
    fails: [],
  },
  { name: 'src/app/ → a feature', file: APP, code: imports('../../../../slack'), fails: ['local/levels'] },
  { name: 'src/app/ → src/app/', file: APP, code: imports('../../../errors'), fails: [] },
  { name: "feature → another feature's module", file: FEATURE, code: imports('../../../../github/api'), fails: ['local/levels'] },
  { name: 'feature → src/main/', file: FEATURE, code: imports('../../../../main/features'), fails: ['local/levels'] },
  { name: "feature → another feature's contract", file: FEATURE, code: imports('../../../../github/contract'), fails: [] },
  { name: "feature → another feature's index", file: FEATURE, code: imports('../../../../runs'), fails: [] },
  { name: 'feature → its own module', file: FEATURE, code: imports('../../../links'), fails: [] },
  { name: 'contract → a store module', file: 'src/slack/contract.ts', code: imports('../app/store/db'), fails: ['local/levels'] },
  {
    name: 'bench → the client and workflow code',
    file: 'bench/lib/deep/probe.ts',
    code: DIRECT,
    fails: ['no-restricted-imports', 'no-restricted-syntax'],
  },
  { name: 'bench/lib/stack.ts, named with its reason', file: 'bench/lib/stack.ts', code: DIRECT, fails: [] },
];

const FOUR = 'export function f(a: number, b: number, c: number, d: number): number {\n  return a + b + c + d;\n}\n';
const THREE = 'export function f(a: number, b: number, c: number): number {\n  return a + b + c;\n}\n';
const OPTIONS =
  'interface Sides {\n  a: number;\n  b: number;\n  c: number;\n  d: number;\n}\nexport function f({ a, b, c, d }: Sides): number {\n  return a + b + c + d;\n}\n';

/** Four parameters fail wherever the cap holds; three, or one options object, keep it. */
const PARAMETER_PROBES: typeof PROBES = [
  { name: 'four parameters in a feature', file: 'src/runs/routes/deep/probe.ts', code: FOUR, fails: ['max-params'] },
  { name: 'four parameters in src/app/', file: 'src/app/http/deep/probe.ts', code: FOUR, fails: ['max-params'] },
  { name: 'four parameters in the composition root', file: 'src/main/deep/probe.ts', code: FOUR, fails: ['max-params'] },
  { name: 'four parameters in a workflow', file: 'workflows/deep/probe.ts', code: FOUR, fails: ['max-params'] },
  { name: 'four parameters in an activity', file: 'activities/deep/probe.ts', code: FOUR, fails: ['max-params'] },
  { name: 'three parameters in a feature', file: 'src/runs/routes/deep/probe.ts', code: THREE, fails: [] },
  { name: 'one options object in a feature', file: 'src/runs/routes/deep/probe.ts', code: OPTIONS, fails: [] },
  { name: 'four parameters in src/slack/', file: 'src/slack/routes/deep/probe.ts', code: FOUR, fails: ['max-params'] },
  { name: 'four parameters in a Slack workflow', file: 'workflows/slack-probe.ts', code: FOUR, fails: ['max-params'] },
  { name: 'four parameters in the Slack activities', file: 'activities/slack-probe.ts', code: FOUR, fails: ['max-params'] },
];

let reported: string[][];
beforeAll(() => {
  reported = reportedAll([...PROBES, ...PARAMETER_PROBES]);
}, 120_000);

describe('import levels and determinism, at any depth (probes)', () => {
  it.each(PROBES.map((probe, index) => [probe.name, index] as const))('%s', (_name, index) => {
    expect([...new Set(reported[index])].sort()).toEqual(PROBES[index]!.fails);
  });
});

describe('at most three parameters (probes)', () => {
  it.each(PARAMETER_PROBES.map((probe, index) => [probe.name, index] as const))('%s', (_name, index) => {
    expect([...new Set(reported[PROBES.length + index])].sort()).toEqual(PARAMETER_PROBES[index]!.fails);
  });
});
