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
/** Paths a walk visits at most through directory links (which can multiply a tree), GitHub's own bound on one tree listing. */
const MAX_VISITED = 100_000;

export type LinkSkip = 'symlink_outside' | 'symlink_loop' | 'symlink_missing' | 'submodule' | 'too_many_files';

/** What the tree gives the sync: the kept files (a link's under its own path) and the kept paths it cannot sync, with why. */
export interface KeptTree {
  files: TreeBlob[];
  skipped: { blob: TreeBlob; reason: LinkSkip }[];
}

type LinkNode =
  { kind: 'file'; sha: string; size: number } | { kind: 'dir' } | { kind: 'link'; sha: string } | { kind: 'submodule'; sha: string };

type LinkResolution = { ok: true; path: string; node: LinkNode } | { ok: false; reason: LinkSkip };

const join = (dir: string, name: string) => (dir === '' ? name : `${dir}/${name}`);

/** The tree as paths to nodes, and each directory's entries. */
function index(tree: Pick<TreeRead, 'blobs' | 'links' | 'submodules' | 'dirs'>) {
  const nodes = new Map<string, LinkNode>([['', { kind: 'dir' }]]);
  const entries = new Map<string, Set<string>>();
  const add = (path: string, node: LinkNode) => {
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

interface WalkOptions {
  globs: readonly string[];
  readLink: (sha: string) => Promise<string>;
  maxLinkReads: number;
}

/** One walk of a tree: the paths it knows, the links it read, and what it keeps. */
class LinkWalk {
  readonly kept: KeptTree = { files: [], skipped: [] };
  private readonly nodes: Map<string, LinkNode>;
  private readonly entries: Map<string, Set<string>>;
  private readonly patterns: RegExp[];
  private readonly canHold: (dir: string) => boolean;
  private readonly texts = new Map<string, string>();
  private visited = 0;

  constructor(
    tree: Pick<TreeRead, 'blobs' | 'links' | 'submodules' | 'dirs'>,
    private readonly options: WalkOptions,
  ) {
    ({ nodes: this.nodes, entries: this.entries } = index(tree));
    this.patterns = options.globs.map(globToRegExp);
    this.canHold = directoryFilter(options.globs);
  }

  private matches(path: string): boolean {
    return this.patterns.some((p) => p.test(path));
  }

  private skip(blob: TreeBlob, reason: LinkSkip): void {
    this.kept.skipped.push({ blob, reason });
  }

  /** A link's target, read once; undefined past the bound on reads. */
  private async linkText(sha: string): Promise<string | undefined> {
    if (!this.texts.has(sha)) {
      if (this.texts.size >= this.options.maxLinkReads) return undefined;
      this.texts.set(sha, await this.options.readLink(sha));
    }
    return this.texts.get(sha);
  }

  /** Where a path leads, every link on it followed (physically: `..` after a link is taken from where the link led). */
  private async resolve(path: string): Promise<LinkResolution> {
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
      const node = this.nodes.get(join(done.join('/'), part));
      if (!node || (node.kind === 'file' && todo.length > 0)) return { ok: false, reason: 'symlink_missing' };
      if (node.kind === 'submodule' && todo.length > 0) return { ok: false, reason: 'submodule' };
      if (node.kind !== 'link') {
        done.push(part);
        continue;
      }
      if (++hops > MAX_LINK_HOPS) return { ok: false, reason: 'symlink_loop' };
      const text = await this.linkText(node.sha);
      if (text === undefined) return { ok: false, reason: 'too_many_files' };
      if (text.startsWith('/')) return { ok: false, reason: 'symlink_outside' };
      todo.unshift(...text.split('/'));
    }
    const real = done.join('/');
    return { ok: true, path: real, node: this.nodes.get(real)! };
  }

  /** A link at `virtual` (its own path in the tree `real`), followed when it can be. */
  private async link(at: { real: string; virtual: string; sha: string }, chain: readonly string[]): Promise<void> {
    const { real, virtual } = at;
    const node = { sha: at.sha };
    if (!this.matches(virtual) && !this.canHold(virtual)) return;
    const to = await this.resolve(real);
    // A link not followed shows the path it names (read already, unless past the bound on reads).
    const named = this.texts.get(node.sha);
    const asLink = {
      path: virtual,
      sha: node.sha,
      size: 0,
      type: 'symlink' as const,
      ...(named === undefined ? {} : { linkTarget: named }),
    };
    if (!to.ok) return this.skip(asLink, to.reason);
    if (to.node.kind === 'file') {
      if (this.matches(virtual))
        this.kept.files.push({ path: virtual, sha: to.node.sha, size: to.node.size, type: 'symlink', linkTarget: to.path });
    } else if (to.node.kind === 'submodule') this.skip({ ...asLink, sha: to.node.sha }, 'submodule');
    else if (this.canHold(virtual)) {
      // A directory the walk is already inside (through its parents or through links) would never end.
      if (chain.includes(to.path)) return this.skip(asLink, 'symlink_loop');
      await this.walk(to.path, virtual, [...chain, to.path]);
    }
  }

  /** Every entry of the directory `real`, seen at `virtual` (which differs below a followed link). */
  async walk(real: string, virtual: string, chain: readonly string[]): Promise<void> {
    for (const name of [...(this.entries.get(real) ?? [])].sort()) {
      const [realPath, path] = [join(real, name), join(virtual, name)];
      const node = this.nodes.get(realPath)!;
      // Only paths reached through a directory link are bounded: the tree itself is GitHub's, already bounded.
      if (realPath !== path && ++this.visited > MAX_VISITED) {
        if (node.kind === 'link' && this.matches(path)) this.skip({ path, sha: node.sha, size: 0, type: 'symlink' }, 'too_many_files');
        continue;
      }
      const linkTarget = realPath === path ? {} : { linkTarget: realPath };
      if (node.kind === 'file' && this.matches(path)) {
        this.kept.files.push({ path, sha: node.sha, size: node.size, type: 'file', ...linkTarget });
      } else if (node.kind === 'dir' && this.canHold(path)) await this.walk(realPath, path, [...chain, realPath]);
      else if (node.kind === 'submodule' && (this.matches(path) || this.canHold(path))) {
        this.skip({ path, sha: node.sha, size: 0, type: 'submodule' }, 'submodule');
      } else if (node.kind === 'link') await this.link({ real: realPath, virtual: path, sha: node.sha }, chain);
    }
  }
}

/**
 * Walks the tree from its root with every link kept (`globs` name the files a sync keeps); reads
 * each link's target through `readLink`.
 */
export async function keptTree(tree: Pick<TreeRead, 'blobs' | 'links' | 'submodules' | 'dirs'>, options: WalkOptions): Promise<KeptTree> {
  const walk = new LinkWalk(tree, options);
  await walk.walk('', '', ['']);
  return walk.kept;
}
