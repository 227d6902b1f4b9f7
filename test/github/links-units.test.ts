/** Symbolic links and submodules as a sync keeps them (src/github/links.ts): pure, links read from a map. */
import { DEFAULT_SYNC_PATHS } from '../../src/github/settings';
import { keptTree } from '../../src/github/links';

type Entry = string | { symlink: string } | { submodule: string };

/** A tree as GitHub's trees API would list it: each link's blob is its target, each directory listed. */
function treeOf(files: Record<string, Entry>) {
  type Blob = { path: string; sha: string; size: number };
  const tree = {
    blobs: [] as Blob[],
    links: [] as Blob[],
    submodules: [] as { path: string; sha: string }[],
    dirs: new Set<string>(),
  };
  const texts = new Map<string, string>();
  for (const [path, entry] of Object.entries(files)) {
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) tree.dirs.add(parts.slice(0, i).join('/'));
    if (typeof entry === 'string') tree.blobs.push({ path, sha: `blob:${path}`, size: entry.length });
    else if ('symlink' in entry) {
      tree.links.push({ path, sha: `link:${path}`, size: entry.symlink.length });
      texts.set(`link:${path}`, entry.symlink);
    } else tree.submodules.push({ path, sha: entry.submodule });
  }
  const reads: string[] = [];
  const readLink = async (sha: string) => {
    reads.push(sha);
    return texts.get(sha)!;
  };
  return { tree: { ...tree, dirs: [...tree.dirs] }, readLink, reads };
}

async function keep(files: Record<string, Entry>, maxLinkReads = 1000) {
  const { tree, readLink, reads } = treeOf(files);
  const kept = await keptTree(tree, { globs: DEFAULT_SYNC_PATHS, readLink, maxLinkReads });
  const sorted = <T extends { path: string }>(list: T[]) => [...list].sort((a, b) => (a.path < b.path ? -1 : 1));
  return {
    files: sorted(kept.files),
    skipped: sorted(kept.skipped.map((s) => ({ ...s.blob, reason: s.reason }))),
    reads,
  };
}

it('a link to a file within the repository is that file under the link’s path; to a directory, its files under the link’s path', async () => {
  const kept = await keep({
    'docs/skill.md': '# Skill',
    'SKILL.md': { symlink: 'docs/skill.md' },
    'shared/hello/SKILL.md': '# Hello',
    'skills/hello': { symlink: '../shared/hello' },
    'skills/chain/SKILL.md': { symlink: '../../SKILL.md' },
    'README.md': 'not kept',
  });
  expect(kept.files).toEqual([
    { path: 'SKILL.md', sha: 'blob:docs/skill.md', size: 7, type: 'symlink', linkTarget: 'docs/skill.md' },
    { path: 'shared/hello/SKILL.md', sha: 'blob:shared/hello/SKILL.md', size: 7, type: 'file' },
    { path: 'skills/chain/SKILL.md', sha: 'blob:docs/skill.md', size: 7, type: 'symlink', linkTarget: 'docs/skill.md' },
    { path: 'skills/hello/SKILL.md', sha: 'blob:shared/hello/SKILL.md', size: 7, type: 'file', linkTarget: 'shared/hello/SKILL.md' },
  ]);
  expect(kept.skipped).toEqual([]);
  // Each link's blob is read once.
  expect(kept.reads.sort()).toEqual(['link:SKILL.md', 'link:skills/chain/SKILL.md', 'link:skills/hello']);
});

it('a link out of the repository, round a loop or to nothing is listed skipped with the path it names; a submodule with its commit', async () => {
  const commit = 'c'.repeat(40);
  const kept = await keep({
    'skills/abs/SKILL.md': { symlink: '/etc/passwd' },
    'skills/up/SKILL.md': { symlink: '../../../outside.md' },
    'skills/self/SKILL.md': { symlink: 'SKILL.md' },
    'skills/a/SKILL.md': { symlink: '../b/SKILL.md' },
    'skills/b/SKILL.md': { symlink: '../a/SKILL.md' },
    'skills/root': { symlink: '..' },
    'skills/gone/SKILL.md': { symlink: 'missing.md' },
    'plugins/vendor': { submodule: commit },
    'plugins/linked': { symlink: 'vendor' },
  });
  expect(kept.files).toEqual([]);
  expect(kept.skipped.map((s) => [s.path, s.type, s.reason, s.linkTarget ?? null])).toEqual([
    ['plugins/linked', 'symlink', 'submodule', 'vendor'],
    ['plugins/vendor', 'submodule', 'submodule', null],
    ['skills/a/SKILL.md', 'symlink', 'symlink_loop', '../b/SKILL.md'],
    ['skills/abs/SKILL.md', 'symlink', 'symlink_outside', '/etc/passwd'],
    ['skills/b/SKILL.md', 'symlink', 'symlink_loop', '../a/SKILL.md'],
    ['skills/gone/SKILL.md', 'symlink', 'symlink_missing', 'missing.md'],
    ['skills/root', 'symlink', 'symlink_loop', '..'],
    ['skills/self/SKILL.md', 'symlink', 'symlink_loop', 'SKILL.md'],
    ['skills/up/SKILL.md', 'symlink', 'symlink_outside', '../../../outside.md'],
  ]);
  expect(kept.skipped.find((s) => s.path === 'plugins/vendor')!.sha).toBe(commit);
});

it('links are read at most `maxLinkReads` times a sync; past that a link is skipped `too_many_files`', async () => {
  const files: Record<string, Entry> = { 'docs/skill.md': '# Skill' };
  for (let i = 0; i < 5; i++) files[`skills/s${i}/SKILL.md`] = { symlink: '../../docs/skill.md' };
  const kept = await keep(files, 3);
  expect(kept.reads).toHaveLength(3);
  expect(kept.files).toHaveLength(3);
  expect(kept.skipped.map((s) => s.reason)).toEqual(['too_many_files', 'too_many_files']);
});
