/**
 * The fake GitHub's git objects, as GitHub's git database API shows them: blobs addressed by git's
 * own SHA (sha1 of `blob <size>\0<bytes>`), trees addressed by their entries, commits with their
 * parent. A tree holds files (mode `100644`), symbolic links (`120000`: a blob holding the path the
 * link names) and submodules (`160000`: type `commit`, the submodule's commit SHA, no blob). A recursive tree listing is in git's order (pre-order, names sorted) and, like GitHub's,
 * truncated past 100,000 entries or 7 MB (a repository can set a lower entry count). Ancestry is
 * answered the way GitHub's compare endpoint does.
 */
import { createHash, randomBytes } from 'node:crypto';

/** Git's blob id: sha1 of `blob <size>\0<bytes>`. */
export function gitBlobSha(content: string | Buffer): string {
  const body = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  return createHash('sha1').update(`blob ${body.length}\0`).update(body).digest('hex');
}

/** A symbolic link to `symlink` (a path, as `ln -s` takes it), or a submodule at commit `submodule`. */
export type GitSpecial = { symlink: string } | { submodule: string };

/** What a path of a commit holds: its bytes (a string is UTF-8), a link or a submodule. */
export type GitContent = string | Buffer | GitSpecial;

interface GitFile {
  sha: string;
  size: number;
  mode: '100644' | '120000' | '160000';
}

interface DirNode {
  sha: string;
  dirs: Map<string, DirNode>;
  blobs: Map<string, GitFile>;
}

interface Commit {
  parent: string | null;
  files: Map<string, GitFile>;
  root?: DirNode;
}

/** GitHub's documented bounds of a recursive tree listing. */
export const TREE_LIMITS = { entries: 100_000, bytes: 7 * 1024 * 1024 };

export interface TreeEntry {
  path: string;
  mode: string;
  type: 'blob' | 'tree' | 'commit';
  sha: string;
  size?: number;
  url?: string;
}

export class GitStore {
  private readonly blobs = new Map<string, Buffer>();
  private readonly commits = new Map<string, Commit>();
  private readonly trees = new Map<string, DirNode>();

  /** A commit of the whole tree `files`, child of `parent`; its SHA. */
  commit(files: Record<string, GitContent>, parent: string | null): string {
    const map = new Map<string, GitFile>();
    for (const [path, content] of Object.entries(files)) {
      if (typeof content === 'object' && 'submodule' in content) {
        map.set(path, { sha: content.submodule, size: 0, mode: '160000' });
        continue;
      }
      const link = typeof content === 'object' && 'symlink' in content;
      // A link is a blob of the path it names, as git stores it.
      const bytes = link ? Buffer.from(content.symlink, 'utf8') : typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
      const sha = gitBlobSha(bytes);
      if (!this.blobs.has(sha)) this.blobs.set(sha, bytes);
      map.set(path, { sha, size: bytes.length, mode: link ? '120000' : '100644' });
    }
    const sha = randomBytes(20).toString('hex');
    this.commits.set(sha, { parent, files: map });
    return sha;
  }

  hasCommit(sha: string): boolean {
    return this.commits.has(sha);
  }

  blob(sha: string): Buffer | undefined {
    return this.blobs.get(sha);
  }

  /** The tree a SHA names: a commit's root tree, or a tree of one. */
  tree(sha: string): DirNode | undefined {
    const commit = this.commits.get(sha);
    return commit ? this.root(commit) : this.trees.get(sha);
  }

  private root(commit: Commit): DirNode {
    if (commit.root) return commit.root;
    const root: DirNode = { sha: '', dirs: new Map(), blobs: new Map() };
    for (const [path, file] of commit.files) {
      const parts = path.split('/');
      let node = root;
      for (const part of parts.slice(0, -1)) {
        let next = node.dirs.get(part);
        if (!next) {
          next = { sha: '', dirs: new Map(), blobs: new Map() };
          node.dirs.set(part, next);
        }
        node = next;
      }
      node.blobs.set(parts.at(-1)!, file);
    }
    this.hash(root);
    commit.root = root;
    return root;
  }

  /** Content-addressed, as git's trees are: a tree SHA names the same entries in any commit. */
  private hash(node: DirNode): string {
    const lines: string[] = [];
    for (const [name, dir] of node.dirs) lines.push(`040000 tree ${this.hash(dir)}\t${name}`);
    for (const [name, file] of node.blobs) lines.push(`${file.mode} ${file.mode === '160000' ? 'commit' : 'blob'} ${file.sha}\t${name}`);
    node.sha = createHash('sha1').update(lines.sort().join('\n')).digest('hex');
    this.trees.set(node.sha, node);
    return node.sha;
  }

  /**
   * A tree's entries as GitHub lists them: one level, or (recursive) every entry below it in
   * git's order, cut at `limits` (`truncated: true`).
   */
  listing(node: DirNode, recursive: boolean, base: string, limits = TREE_LIMITS): { tree: TreeEntry[]; truncated: boolean } {
    const tree: TreeEntry[] = [];
    let bytes = 2;
    const visit = (dir: DirNode, prefix: string): boolean => {
      const names = [...dir.dirs.keys(), ...dir.blobs.keys()].sort((a, b) => byteOrder(sortKey(dir, a), sortKey(dir, b)));
      for (const name of names) {
        const sub = dir.dirs.get(name);
        const file = dir.blobs.get(name);
        const entry: TreeEntry = sub
          ? { path: prefix + name, mode: '040000', type: 'tree', sha: sub.sha, url: `${base}/git/trees/${sub.sha}` }
          : file!.mode === '160000'
            ? { path: prefix + name, mode: '160000', type: 'commit', sha: file!.sha }
            : {
                path: prefix + name,
                mode: file!.mode,
                type: 'blob',
                sha: file!.sha,
                size: file!.size,
                url: `${base}/git/blobs/${file!.sha}`,
              };
        bytes += JSON.stringify(entry).length + 1;
        if (tree.length >= limits.entries || bytes > limits.bytes) return false;
        tree.push(entry);
        if (sub && recursive && !visit(sub, `${prefix}${name}/`)) return false;
      }
      return true;
    };
    const complete = visit(node, '');
    return { tree, truncated: !complete };
  }

  /** Whether `ancestor` is `descendant` or one of its parents. */
  private descends(descendant: string, ancestor: string): boolean {
    for (let sha: string | null = descendant; sha !== null; sha = this.commits.get(sha)?.parent ?? null) if (sha === ancestor) return true;
    return false;
  }

  /** GitHub's compare status of `head` against `base`, or undefined for a commit it does not know. */
  compare(base: string, head: string): 'identical' | 'ahead' | 'behind' | 'diverged' | undefined {
    if (!this.commits.has(base) || !this.commits.has(head)) return undefined;
    if (base === head) return 'identical';
    if (this.descends(head, base)) return 'ahead';
    if (this.descends(base, head)) return 'behind';
    return 'diverged';
  }

  /** A commit's tree SHA. */
  rootSha(commitSha: string): string {
    return this.root(this.commits.get(commitSha)!).sha;
  }
}

const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** Git sorts a directory's entries by name, a tree's name as if it ended with a slash. */
function sortKey(dir: DirNode, name: string): string {
  return dir.dirs.has(name) ? `${name}/` : name;
}
