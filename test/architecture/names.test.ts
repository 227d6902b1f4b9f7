/**
 * One meaning per name: no top-level name (function, class, type, interface, enum or variable,
 * exported or not) is defined in two modules of src/, workflows/ or activities/, so a name found
 * in one file is the thing it names everywhere. A module that only passes a name on
 * (`export { x } from './y'`) defines nothing. The few names defined more than once on purpose
 * are listed below, each with the modules that may define it and why. Pure: reads files only.
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const root = path.resolve(__dirname, '../..');
const SCANNED = ['src', 'workflows', 'activities'];

interface Deliberate {
  /** Globs (`*` within a path segment) of the modules that may define the name. */
  modules: string[];
  reason: string;
}

const GITHUB_SLICE =
  'both in the GitHub slice (src/github/, workflows/github.ts, activities/github.ts), which a change of its own is reworking: renamed there, not here';

/** Names defined in more than one module on purpose. An entry no longer needed fails the test too. */
const DELIBERATE: Readonly<Record<string, Deliberate>> = {
  up: {
    modules: ['src/app/store/migrations/0*.ts'],
    reason: "Kysely's Migrator calls each migration's `up` and `down` by these names (src/app/store/migrations/index.ts)",
  },
  down: {
    modules: ['src/app/store/migrations/0*.ts'],
    reason: "Kysely's Migrator calls each migration's `up` and `down` by these names (src/app/store/migrations/index.ts)",
  },
  Deps: {
    modules: ['src/*/routes/*.ts', 'src/github/sync.ts', 'activities/github.ts'],
    reason:
      "a route module's own slice of its feature's route deps, private to it: one meaning (this module's deps) in every route; " +
      'the two outside src/*/routes/ are ' +
      GITHUB_SLICE,
  },
  exec: {
    modules: ['src/app/store/embedded-postgres.ts', 'src/app/temporal/go-binaries.ts', 'src/cluster/postgres.ts'],
    reason: "Node's `promisify(execFile)`, private to each module that runs a program: an alias of Node's function, not one of ours",
  },
  badId: { modules: ['src/github/routes/*.ts'], reason: GITHUB_SLICE },
  newSyncEventId: { modules: ['src/github/delivery-effects.ts', 'src/github/target-records.ts'], reason: GITHUB_SLICE },
  Trx: { modules: ['src/github/delivery-effects.ts', 'src/github/sync-store.ts'], reason: GITHUB_SLICE },
  single: { modules: ['src/github/relevance.ts', 'src/github/routes/setup.ts'], reason: GITHUB_SLICE },
  refusal: { modules: ['src/github/routes/create-target.ts', 'src/github/sync.ts'], reason: GITHUB_SLICE },
};

/** The names a module defines at its top level. */
export function definedNames(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const names: string[] = [];
  const bind = (name: ts.BindingName) => {
    if (ts.isIdentifier(name)) names.push(name.text);
    else for (const element of name.elements) if (!ts.isOmittedExpression(element)) bind(element.name);
  };
  for (const statement of source.statements) {
    if (
      (ts.isFunctionDeclaration(statement) ||
        ts.isClassDeclaration(statement) ||
        ts.isInterfaceDeclaration(statement) ||
        ts.isTypeAliasDeclaration(statement) ||
        ts.isEnumDeclaration(statement)) &&
      statement.name
    ) {
      names.push(statement.name.text);
    } else if (ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) bind(declaration.name);
    }
  }
  // An overloaded function or a merged declaration is one definition.
  return [...new Set(names)];
}

const globToRegExp = (glob: string) => new RegExp(`^${glob.replace(/[.+?^$()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}$`);

/** `name: modules` for every name defined in two modules or more that the allowlist does not account for. */
export function collisions(modules: ReadonlyMap<string, string>, deliberate: Readonly<Record<string, Deliberate>>): string[] {
  const definers = new Map<string, string[]>();
  for (const [file, text] of modules) {
    for (const name of definedNames(file, text)) definers.set(name, [...(definers.get(name) ?? []), file]);
  }
  const found: string[] = [];
  for (const [name, files] of definers) {
    if (files.length < 2) continue;
    const allowed = Object.hasOwn(deliberate, name) ? deliberate[name]!.modules.map(globToRegExp) : [];
    const outside = files.filter((file) => !allowed.some((re) => re.test(file)));
    if (outside.length > 0) found.push(`${name}: ${files.sort().join(', ')}`);
  }
  for (const name of Object.keys(deliberate)) {
    const files = definers.get(name) ?? [];
    if (files.length < 2) found.push(`${name}: listed as deliberate, but defined in ${files.length} module(s)`);
  }
  return found.sort();
}

function repositoryModules(): Map<string, string> {
  const modules = new Map<string, string>();
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(rel);
      else if (rel.endsWith('.ts')) modules.set(rel, fs.readFileSync(path.join(root, rel), 'utf8'));
    }
  };
  SCANNED.forEach(walk);
  return modules;
}

describe('one meaning per name', () => {
  it('reads what every kind of top-level definition names (probe)', () => {
    const text = [
      "import { a as b } from './x';",
      "export { c } from './y';",
      'export function f() {}',
      'class K {}',
      'interface I {}',
      'type T = 1;',
      'enum E { A }',
      'const { p, q: [r] } = o, s = 1;',
      'let v;',
      'function inner() { const hidden = 1; return hidden; }',
      'declare module "z" { interface Merged {} }',
    ].join('\n');
    expect(definedNames('src/probe.ts', text).sort()).toEqual(['E', 'I', 'K', 'T', 'f', 'inner', 'p', 'r', 's', 'v'].sort());
  });

  it('fails on a name two modules define, and on a stale allowlist entry (probe)', () => {
    const probe = new Map([
      ['src/one/a.ts', 'export function summarize() {}'],
      ['workflows/b.ts', 'const summarize = () => 1;'],
      ['src/one/c.ts', "export { summarize } from './a'; type Deps = 1;"],
      ['src/two/routes/d.ts', 'type Deps = 2;'],
    ]);
    expect(collisions(probe, {})).toEqual(['Deps: src/one/c.ts, src/two/routes/d.ts', 'summarize: src/one/a.ts, workflows/b.ts']);
    const deliberate = {
      Deps: { modules: ['src/*/c.ts', 'src/*/routes/*.ts'], reason: 'probe' },
      gone: { modules: ['src/*.ts'], reason: 'probe' },
    };
    expect(collisions(probe, deliberate)).toEqual([
      'gone: listed as deliberate, but defined in 0 module(s)',
      'summarize: src/one/a.ts, workflows/b.ts',
    ]);
  });

  it('no top-level name of src/, workflows/ or activities/ is defined twice, but those listed with their reason', () => {
    const found = collisions(repositoryModules(), DELIBERATE);
    if (found.length > 0)
      console.error(`Names defined in more than one module (rename one, or list it with its reason):\n${found.join('\n')}`);
    expect(found).toEqual([]);
  });
});
