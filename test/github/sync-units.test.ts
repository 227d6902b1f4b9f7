/** The target sync's pure rules: path globs, the plan against the snapshot, manifest validation, GitHub failures. */
import { classifyGithubFailure } from '../../src/github/api-errors';
import { countChanges, globToRegExp, pickManifests, planSync, validateManifest, type TreeBlob } from '../../src/github/manifests';
import { DEFAULT_SYNC_PATHS } from '../../src/github/settings';

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
    expect(countChanges(plan, snapshot, [{ status: 'ok' }, { status: 'invalid' }])).toEqual({
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

  it.each([401, 403, 404, 422])('%i is final at once', (status) => {
    expect(classifyGithubFailure({ status, message: 'no' }, context)).toEqual({
      retryable: false,
      code: `github_${status}`,
      message: 'no',
      delayMs: 0,
    });
  });

  it('retries 5xx and network errors with exponential backoff and jitter', () => {
    expect(classifyGithubFailure({ status: 502, message: 'bad gateway' }, { ...context, attempt: 3 })).toMatchObject({
      retryable: true,
      code: 'github_502',
      delayMs: 4000,
    });
    expect(classifyGithubFailure({ message: 'fetch failed' }, { ...context, random: () => 0 })).toMatchObject({
      retryable: true,
      code: 'network',
      delayMs: 500,
    });
  });

  it('waits what Retry-After or x-ratelimit-reset asks', () => {
    expect(classifyGithubFailure({ status: 429, headers: { 'retry-after': '30' }, message: 'slow down' }, context)).toMatchObject({
      retryable: true,
      code: 'rate_limited',
      delayMs: 30_000,
    });
    const reset = { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(context.nowMs / 1000 + 90) };
    expect(classifyGithubFailure({ status: 403, headers: reset, message: 'rate limit' }, context)).toMatchObject({
      retryable: true,
      code: 'rate_limited',
      delayMs: 90_000,
    });
  });
});
