/**
 * Symbolic links and submodules in a repository's tree, as a sync keeps them. A link (mode
 * `120000`) is a blob holding the path it names; one that leads, within the repository, to a file
 * is synced as that file under the link's own path, and one that leads to a directory makes that
 * directory's files appear under the link's path, both with `linkTarget`, the path the content came
 * from. A link is never followed out of the repository (an absolute path, or `..` past its root:
 * `symlink_outside`), round a loop (`symlink_loop`: 40 links in one path, as Linux's limit, or a
 * directory inside itself), nor to a path the tree does not hold (`symlink_missing`). A submodule
 * (mode `160000`) is another repository, which the App may not read: it is listed with its commit
 * and never fetched (`submodule`).
 *
 * Pure but for reading links, which the caller hands in (each link's blob is read once a sync,
 * at most `maxLinkReads` of them: past that a link is skipped `too_many_files`).
 */
import type { TreeRead } from './api';
import { directoryFilter, globToRegExp, type TreeBlob } from './manifests';

/** Links one path may pass through before it counts as a loop (Linux's MAXSYMLINKS). */
const MAX_LINK_HOPS = 40;
/** Paths a walk through directory links visits at most, GitHub's own bound on one tree listing. */
const MAX_VISITED = 100_000;

export type LinkSkip = 'symlink_outside' | 'symlink_loop' | 'symlink_missing' | 'submodule' | 'too_many_files';

/** What the tree gives the sync: the kept files (a link's under its own path) and the kept paths it cannot sync, with why. */
export interface KeptTree {
  files: TreeBlob[];
  skipped: { blob: TreeBlob; reason: LinkSkip }[];
}

type Node =
  { kind: 'file'; sha: string; size: number } | { kind: 'dir' } | { kind: 'link'; sha: string } | { kind: 'submodule'; sha: string };

type Resolution = { ok: true; path: string; node: Node } | { ok: false; reason: LinkSkip };

const join = (dir: string, name: string) => (dir === '' ? name : `${dir}/${name}`);

/** The tree as paths to nodes, and each directory's entries. */
function index(tree: Pick<TreeRead, 'blobs' | 'links' | 'submodules' | 'dirs'>) {
  const nodes = new Map<string, Node>([['', { kind: 'dir' }]]);
  const entries = new Map<string, Set<string>>();
  const add = (path: string, node: Node) => {
    nodes.set(path, node);
    const slash = path.lastIndexOf('/');
    const [dir, name] = slash < 0 ? ['', path] : [path.slice(0, slash), path.slice(slash + 1)];
    if (!entries.has(dir)) entries.set(dir, new Set());
    entries.get(dir)!.add(name);
    if (dir !== '' && !nodes.has(dir)) add(dir, { kind: 'dir' });
  };
  for (const dir of tree.dirs) add(dir, { kind: 'dir' });
  for (const blob of tree.blobs) add(blob.path, { kind: 'file', sha: blob.sha, size: blob.size });
  for (const link of tree.links) add(link.path, { kind: 'link', sha: link.sha });
  for (const sub of tree.submodules) add(sub.path, { kind: 'submodule', sha: sub.sha });
  return { nodes, entries };
}

/**
 * Walks the tree from its root with every link kept (`globs` name the files a sync keeps); reads
 * each link's target through `readLink`.
 */
export async function keptTree(
  tree: Pick<TreeRead, 'blobs' | 'links' | 'submodules' | 'dirs'>,
  options: { globs: readonly string[]; readLink: (sha: string) => Promise<string>; maxLinkReads: number },
): Promise<KeptTree> {
  const { nodes, entries } = index(tree);
  const patterns = options.globs.map(globToRegExp);
  const matches = (path: string) => patterns.some((p) => p.test(path));
  const canHold = directoryFilter(options.globs);
  const texts = new Map<string, string>();
  const kept: KeptTree = { files: [], skipped: [] };
  let visited = 0;

  /** A link's target, read once; undefined past the bound on reads. */
  async function linkText(sha: string): Promise<string | undefined> {
    if (!texts.has(sha)) {
      if (texts.size >= options.maxLinkReads) return undefined;
      texts.set(sha, await options.readLink(sha));
    }
    return texts.get(sha);
  }

  /** Where a path leads, every link on it followed (physically: `..` after a link is taken from where the link led). */
  async function resolve(path: string): Promise<Resolution> {
    const done: string[] = [];
    const todo = path.split('/');
    let hops = 0;
    while (todo.length > 0) {
      const part = todo.shift()!;
      if (part === '' || part === '.') continue;
      if (part === '..') {
        if (done.length === 0) return { ok: false, reason: 'symlink_outside' };
        done.pop();
        continue;
      }
      const node = nodes.get(join(done.join('/'), part));
      if (!node || (node.kind === 'file' && todo.length > 0)) return { ok: false, reason: 'symlink_missing' };
      if (node.kind === 'submodule' && todo.length > 0) return { ok: false, reason: 'submodule' };
      if (node.kind !== 'link') {
        done.push(part);
        continue;
      }
      if (++hops > MAX_LINK_HOPS) return { ok: false, reason: 'symlink_loop' };
      const text = await linkText(node.sha);
      if (text === undefined) return { ok: false, reason: 'too_many_files' };
      if (text.startsWith('/')) return { ok: false, reason: 'symlink_outside' };
      todo.unshift(...text.split('/'));
    }
    const real = done.join('/');
    return { ok: true, path: real, node: nodes.get(real)! };
  }

  const skip = (blob: TreeBlob, reason: LinkSkip) => kept.skipped.push({ blob, reason });

  /** A link at `virtual` (its own path in the tree `real`), followed when it can be. */
  async function link(real: string, virtual: string, node: { sha: string }, chain: readonly string[]): Promise<void> {
    if (!matches(virtual) && !canHold(virtual)) return;
    const to = await resolve(real);
    // A link not followed shows the path it names (read already, unless past the bound on reads).
    const named = texts.get(node.sha);
    const asLink = {
      path: virtual,
      sha: node.sha,
      size: 0,
      type: 'symlink' as const,
      ...(named === undefined ? {} : { linkTarget: named }),
    };
    if (!to.ok) return skip(asLink, to.reason);
    if (to.node.kind === 'file') {
      if (matches(virtual)) kept.files.push({ path: virtual, sha: to.node.sha, size: to.node.size, type: 'symlink', linkTarget: to.path });
    } else if (to.node.kind === 'submodule') skip({ ...asLink, sha: to.node.sha }, 'submodule');
    else if (canHold(virtual)) {
      // A directory the walk is already inside (through its parents or through links) would never end.
      if (chain.includes(to.path)) return skip(asLink, 'symlink_loop');
      await walk(to.path, virtual, [...chain, to.path]);
    }
  }

  /** Every entry of the directory `real`, seen at `virtual` (which differs below a followed link). */
  async function walk(real: string, virtual: string, chain: readonly string[]): Promise<void> {
    for (const name of [...(entries.get(real) ?? [])].sort()) {
      const [realPath, path] = [join(real, name), join(virtual, name)];
      const node = nodes.get(realPath)!;
      if (++visited > MAX_VISITED) {
        if (node.kind === 'link' && matches(path)) skip({ path, sha: node.sha, size: 0, type: 'symlink' }, 'too_many_files');
        continue;
      }
      const linkTarget = realPath === path ? {} : { linkTarget: realPath };
      if (node.kind === 'file' && matches(path)) kept.files.push({ path, sha: node.sha, size: node.size, type: 'file', ...linkTarget });
      else if (node.kind === 'dir' && canHold(path)) await walk(realPath, path, [...chain, realPath]);
      else if (node.kind === 'submodule' && (matches(path) || canHold(path))) {
        skip({ path, sha: node.sha, size: 0, type: 'submodule' }, 'submodule');
      } else if (node.kind === 'link') await link(realPath, path, node, chain);
    }
  }

  await walk('', '', ['']);
  return kept;
}
