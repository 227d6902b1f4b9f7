/**
 * The README and docs/ state facts the code must match. These checks read files only (no
 * server): the configuration variables come from the zod schema itself, the routes, metrics,
 * search attributes and GitHub reasons from the source text.
 */
import fs from 'node:fs';
import path from 'node:path';
import { envSchema } from '../../src/main/config';
import { clusterSettings } from '../../src/cluster/settings';
import { runtimeSettings } from '../../src/cli/runtime/settings';

const root = path.resolve(__dirname, '../..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');

const DOC_PAGES = [
  'configuration.md',
  'operations.md',
  'performance.md',
  'slack.md',
  'github.md',
  'runs.md',
  'mcp.md',
  'architecture.md',
] as const;

const docsDir = path.join(root, 'docs');
const allDocs = fs.existsSync(docsDir) ? fs.readdirSync(docsDir).filter((f) => f.endsWith('.md')) : [];
const docText = (page: string) => read(path.join('docs', page));
const everyDoc = () => allDocs.map((page) => docText(page)).join('\n');

/** Every file under `dir` (relative to the root) whose name passes `keep`. */
function walk(dir: string, keep: (name: string) => boolean): string[] {
  const abs = path.join(root, dir);
  if (!fs.existsSync(abs)) return [];
  return fs.readdirSync(abs, { withFileTypes: true }).flatMap((entry) => {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) return walk(rel, keep);
    return keep(entry.name) ? [rel] : [];
  });
}

/** The first cell of each markdown table row, when it is one `code span`. */
function firstCodeCells(markdown: string): string[] {
  return markdown
    .split('\n')
    .map((line) => /^\|\s*`([^`]+)`\s*\|/.exec(line)?.[1])
    .filter((cell): cell is string => cell !== undefined);
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(markdown: string): Set<string> {
  const withoutCode = markdown.replace(/^```[\s\S]*?^```/gm, '');
  return new Set([...withoutCode.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => slug(m[1]!)));
}

/** Relative markdown links `[text](target)` of a file, code blocks excluded. */
function relativeLinks(markdown: string): string[] {
  const withoutCode = markdown.replace(/^```[\s\S]*?^```/gm, '');
  return [...withoutCode.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((target) => !/^[a-z]+:/i.test(target));
}

/** A table cell longer than this is a paragraph no reader scans: it belongs in prose or a list below the table. */
const MAX_CELL = 300;

/**
 * `file:line: a cell of N characters` for each table cell of `markdown` longer than MAX_CELL.
 * Cells end at unescaped pipes (a table writes a pipe inside a cell, code spans included, as
 * `\|`); lines of code blocks are not table rows.
 */
function longCells(file: string, markdown: string): string[] {
  const withoutCode = markdown.replace(/^```[\s\S]*?^```/gm, (block) => block.replace(/[^\n]/g, ''));
  return withoutCode.split('\n').flatMap((line, i) =>
    line.trimStart().startsWith('|')
      ? line
          .split(/(?<!\\)\|/)
          .map((cell) => cell.trim())
          .filter((cell) => cell.length > MAX_CELL)
          .map((cell) => `${file}:${i + 1}: a cell of ${cell.length} characters`)
      : [],
  );
}

describe('README.md', () => {
  const readme = read('README.md');

  it('is at most 200 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(200);
  });

  it('gives the two quick-start commands', () => {
    expect(readme).toContain('npm install && npm start');
    expect(readme).toMatch(/^npm test\b/m);
  });

  it('links every docs page, and every docs/*.md link resolves to a file', () => {
    const links = relativeLinks(readme).filter((target) => target.startsWith('docs/'));
    const missing = links.filter((target) => !fs.existsSync(path.join(root, target.split('#')[0]!)));
    expect(missing).toEqual([]);
    const linked = new Set(links.map((target) => target.split('#')[0]));
    expect(DOC_PAGES.filter((page) => !linked.has(`docs/${page}`))).toEqual([]);
  });
});

describe('docs/', () => {
  it.each(DOC_PAGES)('has %s', (page) => {
    expect(allDocs).toContain(page);
  });

  it('has only relative links that resolve, to files and to their headings', () => {
    const broken: string[] = [];
    for (const file of ['README.md', ...allDocs.map((page) => `docs/${page}`)]) {
      for (const target of relativeLinks(read(file))) {
        const [targetPath, anchor] = target.split('#') as [string, string | undefined];
        const resolved = targetPath === '' ? file : path.join(path.dirname(file), targetPath);
        if (!fs.existsSync(path.join(root, resolved))) {
          broken.push(`${file}: ${target} (no such file)`);
          continue;
        }
        if (anchor && resolved.endsWith('.md') && !anchorsOf(read(resolved)).has(anchor)) {
          broken.push(`${file}: ${target} (no such heading)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});

describe('tables in README.md and docs/', () => {
  const pages = ['README.md', ...allDocs.map((page) => `docs/${page}`)];

  it('tells a long cell from a short one, an escaped pipe from a border, a code block from a table (probe)', () => {
    expect(longCells('probe.md', `| a | ${'x'.repeat(MAX_CELL)} |`)).toEqual([]);
    expect(longCells('probe.md', `text\n| a | ${'x'.repeat(MAX_CELL + 1)} |`)).toEqual([
      `probe.md:2: a cell of ${MAX_CELL + 1} characters`,
    ]);
    expect(longCells('probe.md', `| \`${'x'.repeat(MAX_CELL / 2)}\\|${'y'.repeat(MAX_CELL / 2)}\` |`)).toHaveLength(1);
    expect(longCells('probe.md', `\`\`\`\n| ${'x'.repeat(MAX_CELL + 1)} |\n\`\`\`\n`)).toEqual([]);
  });

  it(`have no cell longer than ${MAX_CELL} characters`, () => {
    expect(pages).toEqual(expect.arrayContaining(['README.md', 'docs/runs.md', 'docs/github.md']));
    const offenders = pages.flatMap((file) => longCells(file, read(file)));
    if (offenders.length > 0) console.error(`Table cells to cut into prose or a list below the table:\n${offenders.join('\n')}`);
    expect(offenders).toEqual([]);
  });
});

describe('docs/configuration.md', () => {
  const configuration = docText('configuration.md');
  // The service's settings, and those the cluster launcher and `den runtime` (a client of the API) parse for themselves.
  const runtimeVariables = Object.keys(runtimeSettings.shape);
  const variables = [...new Set([...Object.keys(envSchema.shape), ...Object.keys(clusterSettings.shape), ...runtimeVariables])];
  const documented = firstCodeCells(configuration).filter((cell) => /^[A-Z][A-Z0-9_]*$/.test(cell));

  it('the schema is read (sanity)', () => {
    expect(variables.length).toBeGreaterThan(20);
  });

  it('documents every variable of the config schema in a table row', () => {
    expect(variables.filter((name) => !documented.includes(name))).toEqual([]);
  });

  it("documents the runtime's variables under the runtime's heading", () => {
    const section = /^## The reference runtime[^\n]*\n([\s\S]*?)(?=^## )/m.exec(configuration)?.[1] ?? '';
    expect(runtimeVariables.length).toBeGreaterThan(0);
    expect(runtimeVariables.filter((name) => !firstCodeCells(section).includes(name))).toEqual([]);
  });

  it("documents no variable the schema does not know (here, or in any other page's tables)", () => {
    expect(documented.filter((name) => !variables.includes(name))).toEqual([]);
    const elsewhere = allDocs
      .filter((page) => page !== 'configuration.md')
      .flatMap((page) =>
        firstCodeCells(docText(page))
          .filter((cell) => /^[A-Z][A-Z0-9]*_[A-Z0-9_]+$/.test(cell))
          .map((cell) => `${page}: ${cell}`),
      );
    expect(elsewhere.filter((entry) => !variables.includes(entry.split(': ')[1]!))).toEqual([]);
  });

  it('documents each variable once', () => {
    expect(documented.filter((name, i) => documented.indexOf(name) !== i)).toEqual([]);
  });
});

describe('routes', () => {
  /**
   * Route paths as the source states them: `path: '/…'` or `path: SOME_CONSTANT`, and the
   * entries of `aliases: [...]`. Constants are resolved from `const NAME = '/…'` anywhere in src/.
   */
  // Route files: `…routes.ts`, every module of a feature's `routes/` folder, and the 410 table.
  const routeFiles = walk('src', (name) => name.endsWith('.ts')).filter(
    (file) => file.endsWith('routes.ts') || path.basename(file) === 'deprecated.ts' || path.basename(path.dirname(file)) === 'routes',
  );
  const sources = walk('src', (name) => name.endsWith('.ts')).map((file) => read(file));
  const constants = new Map<string, string>();
  for (const source of sources) {
    for (const m of source.matchAll(/\bconst\s+([A-Z][A-Z0-9_]*)\s*(?::\s*string\s*)?=\s*(['"`])(\/[^'"`$]*)\2/g)) {
      constants.set(m[1]!, m[3]!);
    }
  }
  const unresolved: string[] = [];
  const value = (token: string): string | undefined => {
    const literal = /^(['"`])(\/[^'"`$]*)\1$/.exec(token.trim());
    if (literal) return literal[2];
    if (/^`.*\$\{/.test(token.trim())) unresolved.push(token.trim());
    const name = token.trim();
    if (/^[A-Z][A-Z0-9_]*$/.test(name)) {
      const resolved = constants.get(name);
      if (resolved === undefined) unresolved.push(name);
      return resolved;
    }
    return undefined;
  };
  const paths = new Set<string>();
  for (const file of routeFiles) {
    const source = read(file);
    for (const m of source.matchAll(/\bpath\s*:\s*((['"`])\/[^'"`]*\2|[A-Z][A-Z0-9_]*)\s*[,}\n]/g)) {
      const p = value(m[1]!);
      if (p) paths.add(p);
    }
    // A path built from a template (`${PREFIX}/…`) can't be read here: say so rather than skip it.
    for (const m of source.matchAll(/\bpath\s*:\s*(`[^`]*\$\{[^`]*`)/g)) unresolved.push(`${file}: ${m[1]}`);
    for (const m of source.matchAll(/\baliases\s*:\s*\[([^\]]*)\]/g)) {
      for (const token of m[1]!.split(',').filter((t) => t.trim() !== '')) {
        const p = value(token);
        if (p) paths.add(p);
      }
    }
  }

  it('are found in the source (sanity)', () => {
    expect(routeFiles.some((file) => file.endsWith('system-routes.ts'))).toBe(true);
    expect(unresolved).toEqual([]);
    expect(paths.size).toBeGreaterThanOrEqual(15);
  });

  it('are each listed in some docs page', () => {
    const docs = everyDoc();
    expect([...paths].filter((p) => !docs.includes(p)).sort()).toEqual([]);
  });
});

describe('docs/operations.md', () => {
  const operations = docText('operations.md');

  it('lists every metric the service defines, and no other den_ metric', () => {
    const metricsSource = read('src/app/metrics.ts');
    const fromRegistry = [...metricsSource.matchAll(/\bname\s*:\s*['"`](den_[a-z0-9_]+)['"`]/g)].map((m) => m[1]!);
    expect(fromRegistry.length).toBeGreaterThan(0);
    // The worker's own metrics (SDK metric meter), created in workflows or activities.
    const fromWorker = [...walk('workflows', (n) => n.endsWith('.ts')), ...walk('activities', (n) => n.endsWith('.ts'))]
      .flatMap((file) => [...read(file).matchAll(/create(?:Counter|Histogram|Gauge)\(\s*['"`](den_[a-z0-9_]+)['"`]/g)])
      .map((m) => m[1]!);
    const defined = [...fromRegistry, ...fromWorker];
    expect(defined.filter((name) => !operations.includes(`\`${name}\``))).toEqual([]);
    const documented = firstCodeCells(operations).filter((cell) => cell.startsWith('den_'));
    expect(documented.filter((name) => !defined.includes(name))).toEqual([]);
  });

  it('lists every custom search attribute', () => {
    const names = walk('src', (n) => n.endsWith('.ts'))
      .flatMap((file) => [...read(file).matchAll(/defineSearchAttributeKey\(\s*['"`](\w+)['"`]/g)])
      .map((m) => m[1]!);
    expect(names.length).toBeGreaterThan(0);
    const documented = firstCodeCells(operations);
    expect(names.filter((name) => !documented.includes(name))).toEqual([]);
  });
});

describe('docs/github.md', () => {
  it('lists every stable reason of the not-accepted answer', () => {
    const reasons = walk('src/github', (n) => n.endsWith('.ts')).flatMap((file) => {
      const block = /\bIGNORED\s*=\s*\{([\s\S]*?)\}\s*as\s+const/.exec(read(file))?.[1];
      return block ? [...block.matchAll(/:\s*(['"`])([^'"`]+)\1/g)].map((m) => m[2]!) : [];
    });
    expect(reasons.length).toBeGreaterThan(5);
    const github = docText('github.md');
    expect(reasons.filter((reason) => !github.includes(`\`${reason}\``))).toEqual([]);
  });
});

describe('docs/architecture.md', () => {
  /** The files of src/ that the "Settings in one place" rule names. */
  const namedReaders = () => {
    const rule = /\*\*Settings in one place per process kind\.\*\*([\s\S]*?)\n- \*\*/.exec(docText('architecture.md'))?.[1] ?? '';
    return [...rule.matchAll(/`(src\/[^`]+\.ts)`/g)].map((m) => m[1]!).sort();
  };

  it('names exactly the files of src/ that read process.env, as ESLint allows them', () => {
    const eslint = read('eslint.config.mjs');
    const allowBlock = /files: \[([^\]]*)\],\s*rules: \{ 'no-restricted-properties': 'off' \}/.exec(eslint)?.[1] ?? '';
    const allowed = [...allowBlock.matchAll(/'(src\/[^']+\.ts)'/g)].map((m) => m[1]!);
    const reading = walk('src', (n) => n.endsWith('.ts')).filter((file) =>
      /process\.env\b/.test(read(file).replace(/\/\*\*[\s\S]*?\*\/|\/\/.*$/gm, '')),
    );
    const disabled = reading.filter((file) => /process\.env.*eslint-disable-line no-restricted-properties/.test(read(file)));
    expect(allowed.length).toBeGreaterThan(0);
    // Every file that reads it is allowed by ESLint or marked on its line, and the doc names each.
    expect(reading.filter((file) => !allowed.includes(file) && !disabled.includes(file))).toEqual([]);
    expect(namedReaders()).toEqual([...new Set([...allowed, ...disabled])].sort());
  });
});
