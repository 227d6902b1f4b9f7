/** The target sync's pure rules: path globs, the walk's directory filter, the plan against the snapshot, content, manifest validation, GitHub failures, ref matching. */
import fc from 'fast-check';
import { classifyGithubFailure, MAX_HEADERLESS_WAIT_MS, MIN_RATE_LIMIT_WAIT_MS } from '../../src/github/api-errors';
import {
  countChanges,
  decodeBlob,
  directoryFilter,
  globToRegExp,
  pickManifests,
  planSync,
  validateManifest,
  type TreeBlob,
} from '../../src/github/manifests';
import { DEFAULT_SYNC_PATHS } from '../../src/github/settings';
import { refMatches } from '../../src/github/target-match';

const blob = (path: string, sha = `sha-${path}`, size = 10): TreeBlob => ({ path, sha, size });

describe('globs', () => {
  it.each([
    ['**/SKILL.md', 'SKILL.md', true],
    ['**/SKILL.md', 'a/b/SKILL.md', true],
    ['**/SKILL.md', 'a/b/skill.md', false],
    ['**/.claude-plugin/plugin.json', '.claude-plugin/plugin.json', true],
    ['**/.claude-plugin/plugin.json', 'plugins/x/.claude-plugin/plugin.json', true],
    ['.mcp.json', 'sub/.mcp.json', false],
    ['.mcp.json', 'xmcp.json', false],
    ['docs/*.md', 'docs/a.md', true],
    ['docs/*.md', 'docs/a/b.md', false],
    ['file?.txt', 'file1.txt', true],
  ])('%s against %s → %s', (glob, path, expected) => {
    expect(globToRegExp(glob).test(path)).toBe(expected);
  });

  it('picks the default manifests, sorted by path', () => {
    const tree = [
      'README.md',
      'plugins/a/.claude-plugin/plugin.json',
      '.mcp.json',
      'skills/x/SKILL.md',
      '.claude-plugin/marketplace.json',
    ].map((p) => blob(p));
    expect(pickManifests(tree, DEFAULT_SYNC_PATHS).map((b) => b.path)).toEqual([
      '.claude-plugin/marketplace.json',
      '.mcp.json',
      'plugins/a/.claude-plugin/plugin.json',
      'skills/x/SKILL.md',
    ]);
  });
});

describe('planSync', () => {
  const bounds = { maxFiles: 3, maxFileBytes: 100, full: false };

  it('fetches only new or changed blobs and removes what is gone', () => {
    const snapshot = [
      { path: 'a', blobSha: 'sha-a', status: 'ok' as const },
      { path: 'b', blobSha: 'old', status: 'ok' as const },
      { path: 'gone', blobSha: 'x', status: 'ok' as const },
    ];
    const plan = planSync([blob('a'), blob('b'), blob('c')], snapshot, bounds);
    expect(plan.fetch.map((b) => b.path)).toEqual(['b', 'c']);
    expect(plan.unchanged).toEqual(['a']);
    expect(plan.remove).toEqual(['gone']);
    expect(
      countChanges(plan, snapshot, [
        { blob: blob('b'), status: 'ok' },
        { blob: blob('c'), status: 'invalid' },
      ]),
    ).toEqual({
      added: 1,
      changed: 1,
      removed: 1,
      skipped: 0,
      invalid: 1,
    });
  });

  it('refetches everything on a full resync, and skips files past the bounds', () => {
    const snapshot = [{ path: 'a', blobSha: 'sha-a', status: 'ok' as const }];
    const plan = planSync([blob('a'), blob('big', 'x', 101), blob('c'), blob('d')], snapshot, { ...bounds, full: true });
    expect(plan.fetch.map((b) => b.path)).toEqual(['a', 'c']);
    expect(plan.skip.map((s) => [s.blob.path, s.reason])).toEqual([
      ['big', 'too_large'],
      ['d', 'too_many_files'],
    ]);
  });

  it('fetches a previously skipped path again even with the same blob', () => {
    const plan = planSync([blob('a')], [{ path: 'a', blobSha: 'sha-a', status: 'skipped' }], bounds);
    expect(plan.fetch.map((b) => b.path)).toEqual(['a']);
  });
});

describe('validateManifest', () => {
  it('accepts a JSON object and any Markdown', () => {
    expect(validateManifest('x/plugin.json', '{"name":"a"}')).toEqual({ status: 'ok' });
    expect(validateManifest('x/SKILL.md', '{not json')).toEqual({ status: 'ok' });
  });
  it('keeps an unparsable or non-object JSON manifest as invalid with its error', () => {
    expect(validateManifest('plugin.json', '{"name": ')).toMatchObject({
      status: 'invalid',
      error: expect.stringMatching(/^invalid JSON/),
    });
    expect(validateManifest('plugin.json', '[1]')).toEqual({ status: 'invalid', error: 'not a JSON object' });
  });
});

describe('classifyGithubFailure', () => {
  const context = { attempt: 1, baseDelayMs: 1000, nowMs: 1_700_000_000_000, random: () => 1 };

  it.each([401, 403, 404, 409, 422])('%i is final at once', (status) => {
    expect(classifyGithubFailure({ status, message: 'no' }, context)).toEqual({ kind: 'final', code: `github_${status}`, message: 'no' });
  });

  it('retries 5xx and network errors with exponential backoff and jitter', () => {
    expect(classifyGithubFailure({ status: 502, message: 'bad gateway' }, { ...context, attempt: 3 })).toMatchObject({
      kind: 'retry',
      code: 'github_502',
      delayMs: 4000,
    });
    expect(classifyGithubFailure({ message: 'fetch failed' }, { ...context, random: () => 0 })).toMatchObject({
      kind: 'retry',
      code: 'network',
      delayMs: 500,
    });
  });

  it('a primary limit waits until x-ratelimit-reset, however far: an hour is not cut to five minutes', () => {
    const reset = { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(context.nowMs / 1000 + 40 * 60) };
    expect(classifyGithubFailure({ status: 403, headers: reset, message: 'API rate limit exceeded' }, context)).toEqual({
      kind: 'rate_limited',
      code: 'rate_limited',
      limit: 'primary',
      message: 'API rate limit exceeded',
      untilMs: context.nowMs + 40 * 60_000,
      headerless: false,
    });
    expect(classifyGithubFailure({ status: 429, headers: reset, message: 'x' }, context)).toMatchObject({ limit: 'primary' });
  });

  it('a secondary limit waits what retry-after asks', () => {
    expect(classifyGithubFailure({ status: 429, headers: { 'retry-after': '30' }, message: 'slow down' }, context)).toMatchObject({
      kind: 'rate_limited',
      limit: 'secondary',
      untilMs: context.nowMs + 30_000,
      headerless: false,
    });
    const headers = { 'retry-after': '90', 'x-ratelimit-remaining': '4000' };
    expect(classifyGithubFailure({ status: 403, headers, message: 'You have exceeded a secondary rate limit' }, context)).toMatchObject({
      kind: 'rate_limited',
      untilMs: context.nowMs + 90_000,
    });
  });

  it('a secondary limit without headers (a 403 that says so, or a bare 429) waits a minute, doubled for each in a row, up to an hour', () => {
    const secondary = { status: 403, headers: { 'x-ratelimit-remaining': '4990' }, message: 'You have exceeded a secondary rate limit.' };
    expect(classifyGithubFailure(secondary, context)).toMatchObject({
      kind: 'rate_limited',
      limit: 'secondary',
      untilMs: context.nowMs + 60_000,
      headerless: true,
    });
    expect(classifyGithubFailure(secondary, { ...context, rateLimitStrikes: 2 })).toMatchObject({
      untilMs: context.nowMs + 4 * MIN_RATE_LIMIT_WAIT_MS,
    });
    expect(classifyGithubFailure(secondary, { ...context, rateLimitStrikes: 40 })).toMatchObject({
      untilMs: context.nowMs + MAX_HEADERLESS_WAIT_MS,
    });
    expect(classifyGithubFailure({ status: 429, message: 'Too Many Requests' }, context)).toMatchObject({
      untilMs: context.nowMs + 60_000,
    });
    // A 403 that is no rate limit stays a refusal.
    expect(
      classifyGithubFailure(
        { status: 403, headers: { 'x-ratelimit-remaining': '4990' }, message: 'Resource not accessible by integration' },
        context,
      ),
    ).toMatchObject({
      kind: 'final',
      code: 'github_403',
    });
  });
});

describe('directoryFilter', () => {
  it('reads only the directories below which a path can match', () => {
    const canHold = directoryFilter(['.claude-plugin/marketplace.json', 'plugins/*/.claude-plugin/plugin.json', 'docs/*.md']);
    expect(['', '.claude-plugin', 'plugins', 'plugins/a', 'plugins/a/.claude-plugin', 'docs'].filter(canHold)).toHaveLength(6);
    expect(['vendor', 'plugins/a/src', 'plugins/a/.claude-plugin/deep', 'docs/sub', '.claude-plugin/x'].filter(canHold)).toEqual([]);
    const anywhere = directoryFilter(DEFAULT_SYNC_PATHS);
    expect(['vendor', 'a/b/c/d'].every(anywhere)).toBe(true);
  });

  it('never skips a directory that holds a matching path (property)', () => {
    const segment = fc.constantFrom('a', 'b', '.claude-plugin', 'plugin.json', 'SKILL.md', 'x.md');
    const glob = fc.array(fc.constantFrom('a', '*', '**', '.claude-plugin', '*.md', 'plugin.json', 'SKILL.md', '?'), {
      minLength: 1,
      maxLength: 4,
    });
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 5 }), glob, (parts, globParts) => {
        const path = parts.join('/');
        const pattern = globParts.join('/');
        fc.pre(globToRegExp(pattern).test(path));
        const canHold = directoryFilter([pattern]);
        for (let i = 0; i < parts.length; i++) expect(canHold(parts.slice(0, i).join('/'))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('content', () => {
  it('decodes UTF-8 text, and tells a binary file or a NUL byte', () => {
    expect(decodeBlob(Buffer.from('# Skill ✓'))).toEqual({ ok: true, text: '# Skill ✓' });
    expect(decodeBlob(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0xff]))).toEqual({ ok: false, reason: 'binary' });
    expect(decodeBlob(Buffer.from('{"a":1}\u0000'))).toEqual({ ok: false, reason: 'nul_byte' });
  });

  it('parses a JSON manifest that starts with a byte-order mark', () => {
    const withBom = decodeBlob(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"name":"a"}')]));
    expect(withBom.ok && validateManifest('plugin.json', withBom.text)).toEqual({ status: 'ok' });
  });

  it('keeps snapshot paths in directories the walk left unread, and removes only what the read tree lacks', () => {
    const snapshot = [
      { path: 'deep/x/SKILL.md', blobSha: 's1', status: 'ok' as const },
      { path: 'gone/SKILL.md', blobSha: 's2', status: 'ok' as const },
    ];
    const plan = planSync([blob('a/SKILL.md')], snapshot, { maxFiles: 10, maxFileBytes: 100, full: false, unread: ['deep'] });
    expect(plan.remove).toEqual(['gone/SKILL.md']);
    expect(plan.unchanged).toEqual(['deep/x/SKILL.md']);
    expect(countChanges(plan, snapshot, [{ blob: blob('a/SKILL.md'), status: 'skipped' }])).toMatchObject({ added: 0, skipped: 1 });
  });
});

describe('refMatches', () => {
  const push = (ref: string, defaultBranch: string | null = 'main') => ({ ref, defaultBranch });
  it('a target with a ref takes that ref only', () => {
    expect(refMatches({ ref: 'refs/heads/dev', defaultBranch: null }, push('refs/heads/dev'))).toBe(true);
    expect(refMatches({ ref: 'refs/heads/dev', defaultBranch: null }, push('refs/heads/main'))).toBe(false);
  });
  it('a target without one follows the default branch: never another branch, never a tag', () => {
    const target = { ref: null, defaultBranch: 'main' };
    expect(refMatches(target, push('refs/heads/main'))).toBe(true);
    expect(refMatches(target, push('refs/heads/dependabot/npm/x'))).toBe(false);
    expect(refMatches(target, push('refs/tags/v1'))).toBe(false);
    // A renamed default branch, as the push names it, wins over the one learnt before.
    expect(refMatches(target, push('refs/heads/trunk', 'trunk'))).toBe(true);
    expect(refMatches({ ref: null, defaultBranch: null }, push('refs/heads/x', null))).toBe(true);
    expect(refMatches({ ref: null, defaultBranch: null }, push('refs/tags/v1', null))).toBe(false);
  });
});
