/**
 * Comments and docs name files that exist, and code comments state their rules instead of
 * pointing elsewhere. Pure: reads files only, no server.
 *
 * A "path" here is a token that starts with a top-level directory of the repository (`src/`,
 * `docs/`, …) or is a root file (`package.json`, …), or any token ending in a source or doc
 * extension (`.ts`, `.md`, …), which must then be a repository path, a path relative to the
 * naming file's folder, or the tail of some repository path (`store/schema.ts`, `config.ts`).
 * A `:line` or `#anchor` suffix is dropped; a path without extension may name a module
 * (`src/app/config` for `src/app/config.ts` or `…/index.ts`); `*`, `<placeholder>`, `{id}` and
 * `…` match as patterns; paths under generated folders (`.data/`, `dist/`, `node_modules/`)
 * are not checked; nor are URL paths (`/openapi.json`), package names (`ipaddr.js`) or names
 * outside the repository (`DATA_DIR/…`). A `.js` name may be the compiled form of a `.ts` source.
 * Markdown link targets `](relative/path)` resolve from the doc's folder.
 *
 * Comments are read from code (src/, workflows/, activities/, test/, bench/, scripts/, bin/ and
 * the root's config files) and from the `#` lines of CI, compose and deploy/ configuration;
 * docs are README.md and every .md file under docs/. Every offender is printed as `file:line: path`.
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const root = path.resolve(__dirname, '../..');

/** Generated or installed: never in the repository, never checked. */
const GENERATED = ['node_modules', 'dist', '.data', '.tools', 'coverage', '.venv-conformance', '.schemathesis', '.git'];

const TOP_DIRS = ['src', 'workflows', 'activities', 'test', 'bench', 'scripts', 'docs', 'deploy', 'bin', '.ci'];

/** Where code comments are read: these folders, the root's config files, and `#`-commented configuration. */
const CODE_DIRS = ['src', 'workflows', 'activities', 'test', 'bench', 'scripts', 'bin'];
const ROOT_CODE = /^(?:eslint\.config\.mjs|jest.*\.js|.*\.config\.(?:m?js|ts))$/;
const CODE_EXT = /\.(?:ts|js|mjs|cjs)$/;
/** Files whose comments are `#` lines: CI, container and Temporal server configuration. */
const HASH_COMMENTED = /^(?:\.ci\/[^/]+|Dockerfile|docker-compose\.ya?ml|\.env\.example|deploy\/.+\.ya?ml)$/;

/**
 * Tokens that look like paths and are not repository files, each with its reason. Keep it tiny.
 */
const ALLOWED: Readonly<Record<string, string>> = {
  '**/.claude-plugin/plugin.json': "a default of GITHUB_SYNC_PATHS: a glob of a synced repository's paths",
  '**/SKILL.md': "a default of GITHUB_SYNC_PATHS: a glob of a synced repository's paths",
  'polar.sh': "Polar's domain, which its MCP preset lists: a host name, not a shell script",
  'SKILL.md': 'a path of a synced repository: the link docs/github.md follows as its example',
  'docs/skill.md': 'a path of a synced repository: the file that link leads to, not this repository’s docs/',
};

/** Every file and folder of the repository (relative, forward slashes), generated ones excluded. */
function listRepository(): { files: string[]; dirs: Set<string> } {
  const files: string[] = [];
  const dirs = new Set<string>();
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      if (dir === '' && GENERATED.includes(entry.name)) continue;
      const rel = dir === '' ? entry.name : `${dir}/${entry.name}`;
      if (entry.isDirectory()) {
        dirs.add(rel);
        walk(rel);
      } else {
        files.push(rel);
      }
    }
  };
  walk('');
  return { files, dirs };
}

const { files: repoFiles, dirs: repoDirs } = listRepository();
const repoFileSet = new Set(repoFiles);
const ROOT_FILES = repoFiles.filter((file) => !file.includes('/'));
const packageJson = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as Record<string, Record<string, string>>;
const DEPENDENCIES = new Set([...Object.keys(packageJson.dependencies ?? {}), ...Object.keys(packageJson.devDependencies ?? {})]);

/** `*` within a segment, `**` across segments, `<x>`, `{x}` and `…` for one segment's worth of text. */
function globToRegExp(pattern: string): RegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*' && pattern[i + 1] === '*') {
      source += '.*';
      i++;
      if (pattern[i + 1] === '/') i++;
    } else if (c === '*' || c === '…') {
      source += '[^/]*';
    } else if (c === '<' || c === '{') {
      const close = pattern.indexOf(c === '<' ? '>' : '}', i);
      if (close === -1) {
        source += `\\${c}`;
        continue;
      }
      source += '[^/]+';
      i = close;
    } else {
      source += c.replace(/[.+?^$()|[\]\\]/g, '\\$&');
    }
  }
  return new RegExp(`^${source}$`);
}

const isPattern = (token: string) => /[*…<>{}]/.test(token);

/** Does `candidate` (relative to the root) exist, as a file, a folder or a module without extension? */
function exists(candidate: string): boolean {
  const clean = path.posix.normalize(candidate).replace(/\/$/, '');
  if (clean.startsWith('../')) return false;
  if (isPattern(clean)) {
    const re = globToRegExp(clean);
    return repoFiles.some((file) => re.test(file)) || [...repoDirs].some((dir) => re.test(dir));
  }
  if (repoFileSet.has(clean) || repoDirs.has(clean)) return true;
  return ['.ts', '.js', '/index.ts'].some((ext) => repoFileSet.has(clean + ext));
}

function isGenerated(token: string): boolean {
  return GENERATED.some((dir) => token === dir || token.startsWith(`${dir}/`));
}

const PATH_CHARS = String.raw`[\w.\-/*<>{}…@+]`;
/** A token that starts with a top-level folder, not inside another path or a URL. */
const TOP_LEVEL = new RegExp(String.raw`(?<![\w.\-/:@])((?:${TOP_DIRS.map((d) => d.replace('.', '\\.')).join('|')})/${PATH_CHARS}*)`, 'g');
/** A token ending in a source or doc extension. */
const WITH_EXTENSION = new RegExp(
  String.raw`(?<![\w.\-/:@*<>{}…])(${PATH_CHARS}*\.(?:ts|js|mjs|cjs|md|json|ya?ml|sh|sql))(?![\w\-/])`,
  'g',
);

/** Drop trailing punctuation and `:line`/`#anchor` suffixes. */
function trimToken(raw: string): string {
  return raw
    .replace(/[#].*$/, '')
    .replace(/:\d+(?:[-:]\d+)*$/, '')
    .replace(/\.{3}$/, '')
    .replace(/[.,;:)]+$/, '')
    .replace(/^([^<]*)>$/, '$1');
}

/** The path-like tokens of one piece of text, each with whether it must resolve from the root only. */
function pathTokens(text: string): { token: string; fromRoot: boolean }[] {
  const found: { token: string; fromRoot: boolean }[] = [];
  const withoutUrls = text.replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+/gi, (url) => ' '.repeat(url.length));
  for (const m of withoutUrls.matchAll(TOP_LEVEL)) found.push({ token: trimToken(m[1]!), fromRoot: true });
  for (const m of withoutUrls.matchAll(WITH_EXTENSION)) {
    const token = trimToken(m[1]!);
    if (found.some((f) => f.token === token)) continue;
    if (TOP_DIRS.some((dir) => token.startsWith(`${dir}/`))) continue;
    found.push({ token, fromRoot: ROOT_FILES.includes(token) });
  }
  // `/openapi.json` is a URL path; `<out.js>` or `{name}.ts` names no particular file; `DATA_DIR/…`
  // and `$HOME/…` are outside the repository.
  return found.filter(({ token }) => token !== '' && !/^[/<{$]|^[A-Z][A-Z0-9_]*\//.test(token));
}

/** Is `token`, named in `file`, a path of the repository? */
function resolves(token: string, fromRoot: boolean, file: string): boolean {
  if (ALLOWED[token] !== undefined || isGenerated(token)) return true;
  if (token.startsWith('.') && !token.startsWith('./') && !token.startsWith('../') && !token.startsWith('.ci/')) {
    // `.test.ts`, `.d.ts`, `.md`: a suffix, not a path.
    return true;
  }
  if (exists(token)) return true;
  // A package's name (`ipaddr.js`), or a compiled name whose source is TypeScript (`index.js`).
  if (DEPENDENCIES.has(token)) return true;
  if (token.endsWith('.js') && resolves(token.replace(/\.js$/, '.ts'), fromRoot, file)) return true;
  if (fromRoot) return false;
  const relative = path.posix.join(path.posix.dirname(file), token);
  if (exists(relative)) return true;
  if (token.startsWith('./') || token.startsWith('../')) return false;
  // A tail of some repository path: `store/schema.ts`, `config.ts`.
  const tail = isPattern(token) ? globToRegExp(`**/${token}`) : undefined;
  return repoFiles.some((repoFile) => (tail ? tail.test(repoFile) : repoFile === token || repoFile.endsWith(`/${token}`)));
}

interface Comment {
  file: string;
  line: number;
  text: string;
}

/** Every comment of a TypeScript or JavaScript file, with the line it starts on. */
function commentsOf(file: string): Comment[] {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  const kind = file.endsWith('.ts') ? ts.ScriptKind.TS : ts.ScriptKind.JS;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind);
  const seen = new Set<number>();
  const comments: Comment[] = [];
  const collect = (ranges: ts.CommentRange[] | undefined) => {
    for (const range of ranges ?? []) {
      if (seen.has(range.pos)) continue;
      seen.add(range.pos);
      comments.push({ file, line: source.getLineAndCharacterOfPosition(range.pos).line + 1, text: text.slice(range.pos, range.end) });
    }
  };
  // Every comment sits in the trivia before some token, the end-of-file token included.
  const visit = (node: ts.Node) => {
    if (ts.isJSDoc(node) || node.kind === ts.SyntaxKind.JSDocComment) return;
    const children = node.getChildren(source);
    if (children.length === 0) {
      collect(ts.getLeadingCommentRanges(text, node.pos));
      return;
    }
    children.forEach(visit);
  };
  collect(ts.getLeadingCommentRanges(text, 0));
  visit(source);
  // A shebang line is not a comment.
  return comments.filter((comment) => !comment.text.startsWith('#!'));
}

/** The `#` comment lines of a shell, Dockerfile or YAML file (a shebang is not a comment). */
function hashCommentsOf(file: string): Comment[] {
  return fs
    .readFileSync(path.join(root, file), 'utf8')
    .split('\n')
    .flatMap((text, i) => (/^\s*#(?!!)/.test(text) ? [{ file, line: i + 1, text }] : []));
}

const commentsIn = (file: string): Comment[] => (HASH_COMMENTED.test(file) ? hashCommentsOf(file) : commentsOf(file));

function codeFiles(): string[] {
  return repoFiles.filter(
    (file) =>
      (CODE_DIRS.some((dir) => file.startsWith(`${dir}/`)) && CODE_EXT.test(file)) ||
      (!file.includes('/') && ROOT_CODE.test(file)) ||
      HASH_COMMENTED.test(file),
  );
}

function docFiles(): string[] {
  return repoFiles.filter((file) => file === 'README.md' || (file.startsWith('docs/') && file.endsWith('.md')));
}

/** `file:line: token` for every path named in `text` that does not resolve. */
function offendersIn(file: string, firstLine: number, text: string): string[] {
  const offenders: string[] = [];
  text.split('\n').forEach((lineText, i) => {
    for (const { token, fromRoot } of pathTokens(lineText)) {
      if (!resolves(token, fromRoot, file)) offenders.push(`${file}:${firstLine + i}: ${token}`);
    }
  });
  return offenders;
}

/** Relative link targets `](target)` of a markdown file, with their lines. */
function markdownLinks(markdown: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = [];
  markdown.split('\n').forEach((lineText, i) => {
    for (const m of lineText.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue;
      links.push({ line: i + 1, target });
    }
  });
  return links;
}

export function pathOffenders(): string[] {
  const offenders: string[] = [];
  for (const file of codeFiles()) {
    for (const comment of commentsIn(file)) offenders.push(...offendersIn(file, comment.line, comment.text));
  }
  for (const file of docFiles()) {
    const markdown = fs.readFileSync(path.join(root, file), 'utf8');
    // Link targets are checked from the doc's folder below, not as tokens.
    const withoutTargets = markdown.replace(/\]\(([^)\s]+)\)/g, (all) => ' '.repeat(all.length));
    offenders.push(...offendersIn(file, 1, withoutTargets));
    for (const { line, target } of markdownLinks(markdown)) {
      const targetPath = decodeURIComponent(target.split('#')[0]!);
      const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(file), targetPath));
      if (!isGenerated(resolved) && !exists(resolved)) offenders.push(`${file}:${line}: (${target})`);
    }
  }
  return offenders;
}

/** Code comments that send the reader elsewhere instead of stating the rule. */
const ELSEWHERE: readonly { name: string; pattern: RegExp }[] = [
  { name: 'issue reference', pattern: /\bissues?\s+#\d+/i },
  { name: 'bare #N reference', pattern: /(?<![\w&/#])#\d+\b/ },
  { name: 'spec section', pattern: /\bspec(?:ification)?\s*(?:§\s*)?\d|\bspec\s*§|(?<!\bRFC \d+ )§\s*\d/i },
  { name: 'issue reference', pattern: /\bthe (?:platform )?issue(?:'s)?\b/i },
  { name: 'notes reference', pattern: /\bsee (?:the )?notes\b|\bbehaviou?r notes\b|\bthe notes'|engineering-notes|\bshared\/reference\b/i },
];

export function elsewhereOffenders(): string[] {
  const offenders: string[] = [];
  for (const file of codeFiles()) {
    for (const comment of commentsIn(file)) {
      comment.text.split('\n').forEach((lineText, i) => {
        for (const { name, pattern } of ELSEWHERE) {
          const m = pattern.exec(lineText);
          if (m) offenders.push(`${file}:${comment.line + i}: ${name}: ${m[0]}`);
        }
      });
    }
  }
  return offenders;
}

export function docIssueOffenders(): string[] {
  return docFiles().flatMap((file) =>
    fs
      .readFileSync(path.join(root, file), 'utf8')
      .split('\n')
      .flatMap((lineText, i) => (/\bissues?\s+#\d+/i.test(lineText) ? [`${file}:${i + 1}: ${lineText.trim()}`] : [])),
  );
}

/**
 * An identifier a doc places in a file: "`name` in `path`", "`name`, `path`" or "`name` (`path`"
 * (one line, a `.ts` path of the repository). The file must exist and define or use that name.
 */
const NAMED_IN = /`([A-Za-z_$][\w$]*)(?:\(\))?`(?:,| in|,? \()\s*`((?:src|workflows|activities|test|bench|scripts)\/[\w./-]+\.ts)`/g;

/** `file:line: name → path` for every identifier a doc names in a file that does not hold it. */
export function identifierOffenders(docs: { file: string; text: string }[]): string[] {
  const offenders: string[] = [];
  for (const { file, text } of docs) {
    text.split('\n').forEach((lineText, i) => {
      for (const m of lineText.matchAll(NAMED_IN)) {
        const [, name, target] = m as unknown as [string, string, string];
        const full = path.join(root, target);
        const holds = fs.existsSync(full) && new RegExp(`\\b${name.replace(/\$/g, '\\$')}\\b`).test(fs.readFileSync(full, 'utf8'));
        if (!holds) offenders.push(`${file}:${i + 1}: ${name} → ${target}`);
      }
    });
  }
  return offenders;
}

const allDocs = () => docFiles().map((file) => ({ file, text: fs.readFileSync(path.join(root, file), 'utf8') }));

describe('identifiers in the docs', () => {
  it('tells an identifier that is where the doc says from one that is not (probe)', () => {
    const probe = {
      file: 'docs/probe.md',
      text: 'the reducer (`applyCancelRequest` in `src/runs/state.ts`), `acceptCancel` (`src/runs/index.ts`)\n`requestCancel`, `src/runs/state.ts`',
    };
    expect(identifierOffenders([probe])).toEqual(['docs/probe.md:2: requestCancel → src/runs/state.ts']);
  });

  it('every identifier a doc places in a file is in that file', () => {
    const offenders = identifierOffenders(allDocs());
    if (offenders.length > 0) console.error(`Identifiers not where the docs say:\n${offenders.join('\n')}`);
    expect(offenders).toEqual([]);
  });
});

describe('paths named in comments and docs', () => {
  it('reads the comments and docs it means to (sanity)', () => {
    expect(codeFiles()).toContain('src/main/compose.ts');
    expect(codeFiles()).toContain('eslint.config.mjs');
    expect(docFiles()).toContain('README.md');
    const comments = commentsOf('test/docs/paths.test.ts');
    expect(comments.some((comment) => comment.text.includes('Tokens that look like paths'))).toBe(true);
  });

  it('tells a missing path from an existing one (sanity)', () => {
    expect(offendersIn('src/x.ts', 1, '// see src/main/compose.ts:12 and src/app/store/ and test/**/*.test.ts')).toEqual([]);
    expect(offendersIn('src/x.ts', 1, '// see src/nowhere.ts and workflows/<feature>-missing.ts')).toEqual([
      'src/x.ts:1: src/nowhere.ts',
      'src/x.ts:1: workflows/<feature>-missing.ts',
    ]);
    expect(offendersIn('src/app/x.ts', 1, '// store/schema.ts, ./config.ts, nowhere.ts')).toEqual(['src/app/x.ts:1: nowhere.ts']);
  });

  it('every path a comment or doc names exists', () => {
    const offenders = pathOffenders();
    if (offenders.length > 0) console.error(`Paths that do not exist (file:line: path):\n${offenders.join('\n')}`);
    expect(offenders).toEqual([]);
  });
});

describe('code comments state the rule', () => {
  it('cite no issue numbers, spec sections or notes', () => {
    const offenders = elsewhereOffenders();
    if (offenders.length > 0) console.error(`Comments that point elsewhere instead of stating the rule:\n${offenders.join('\n')}`);
    expect(offenders).toEqual([]);
  });

  it('docs cite no issue numbers', () => {
    expect(docIssueOffenders()).toEqual([]);
  });
});
