/**
 * What a target sync keeps of a repository's tree, as pure functions: which paths match the sync
 * globs (and which directories can hold one, so a large tree's walk skips the others), which
 * blobs must be fetched against the last snapshot (only those whose blob SHA changed, unless a
 * full resync), whether a fetched blob is text Postgres can store, and whether a JSON manifest
 * parses.
 */
import type { GithubFileStatus, GithubFileType, GithubSyncCounts } from './tables';

/**
 * A blob of the tree at the synced head, as GitHub's trees API lists it; or, for a path kept
 * through a symbolic link, the blob it leads to (`linkTarget`: that blob's path), and for a
 * submodule its commit (src/github/links.ts).
 */
export interface TreeBlob {
  path: string;
  sha: string;
  size: number;
  /** What the path is in the tree; a plain file when absent. */
  type?: GithubFileType;
  linkTarget?: string;
}

/** A row of the target's snapshot, as it is before the sync. */
export interface SnapshotFile {
  path: string;
  blobSha: string;
  status: GithubFileStatus;
  type?: GithubFileType;
  linkTarget?: string | null;
}

function escape(text: string): string {
  return text.replace(/[.+^${}()|[\]\\]/g, '\\$&');
}

/** A double star and slash match any number of directories (none included); `*` and `?` stay within one path segment. */
export function globToRegExp(glob: string): RegExp {
  let source = '';
  for (let i = 0; i < glob.length; i++) {
    const rest = glob.slice(i);
    if (rest.startsWith('**/')) {
      source += '(?:[^/]+/)*';
      i += 2;
    } else if (rest.startsWith('**')) {
      source += '.*';
      i += 1;
    } else if (glob[i] === '*') source += '[^/]*';
    else if (glob[i] === '?') source += '[^/]';
    else source += escape(glob[i]!);
  }
  return new RegExp(`^${source}$`);
}

/**
 * Whether a path below directory `dir` (`a/b`, or `''` for the root) can match `glob`: its
 * segments must match the glob's first ones, leaving at least one for the file. `**` matches any
 * number of segments; a segment with `**` inside it (`a**b`) is taken to match anything from there.
 */
function dirCanHold(glob: readonly string[], dir: readonly string[]): boolean {
  if (dir.length === 0) return glob.length > 0;
  if (glob.length === 0) return false;
  const segment = glob[0]!;
  if (segment === '**') return dirCanHold(glob.slice(1), dir) || dirCanHold(glob, dir.slice(1));
  if (segment.includes('**')) return true;
  return globToRegExp(segment).test(dir[0]!) && dirCanHold(glob.slice(1), dir.slice(1));
}

/** Which directories a tree walk must read: those below which a path can match one of the globs. */
export function directoryFilter(globs: readonly string[]): (dir: string) => boolean {
  const split = globs.map((glob) => glob.split('/'));
  return (dir) => {
    const segments = dir === '' ? [] : dir.split('/');
    return split.some((glob) => dirCanHold(glob, segments));
  };
}

/** The blobs whose path matches one of the globs, sorted by path. */
export function pickManifests(blobs: readonly TreeBlob[], globs: readonly string[]): TreeBlob[] {
  const patterns = globs.map(globToRegExp);
  return blobs.filter((blob) => patterns.some((p) => p.test(blob.path))).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

export interface SyncPlan {
  /** Blobs to fetch: new paths, changed SHAs, or every kept one on a full resync. */
  fetch: TreeBlob[];
  /** Paths recorded without content, and why (`too_large`, `too_many_files`). */
  skip: { blob: TreeBlob; reason: string }[];
  /** Paths of the snapshot that the tree no longer has (or that no longer match). */
  remove: string[];
  /** Paths whose blob is unchanged, or that lie in a directory the walk did not read: nothing to do. */
  unchanged: string[];
}

/** Whether `path` lies below one of `dirs` (`''` is the root: everything). */
function below(path: string, dirs: readonly string[]): boolean {
  return dirs.some((dir) => dir === '' || path.startsWith(`${dir}/`));
}

/** Whether the snapshot's row holds this blob as it is: same content, same kind of path, same link. */
function sameEntry(previous: SnapshotFile | undefined, blob: TreeBlob): boolean {
  if (previous?.blobSha !== blob.sha || previous.status === 'skipped') return false;
  return (previous.type ?? 'file') === (blob.type ?? 'file') && (previous.linkTarget ?? null) === (blob.linkTarget ?? null);
}

/**
 * The work of one sync: the picked blobs against the snapshot, within the size and count bounds,
 * and the paths the tree gives that cannot be synced (`skipped`: links not followed, submodules).
 * A snapshot path in a directory the walk did not read (`unread`, a tree past its bound) is kept
 * as it is: the tree says nothing about it.
 */
export function planSync(
  picked: readonly TreeBlob[],
  snapshot: readonly SnapshotFile[],
  bounds: {
    maxFiles: number;
    maxFileBytes: number;
    full: boolean;
    unread?: readonly string[];
    skipped?: readonly { blob: TreeBlob; reason: string }[];
  },
): SyncPlan {
  const before = new Map(snapshot.map((file) => [file.path, file]));
  const plan: SyncPlan = { fetch: [], skip: [...(bounds.skipped ?? [])], remove: [], unchanged: [] };
  picked.forEach((blob, index) => {
    const previous = before.get(blob.path);
    if (index >= bounds.maxFiles) plan.skip.push({ blob, reason: 'too_many_files' });
    else if (blob.size > bounds.maxFileBytes) plan.skip.push({ blob, reason: 'too_large' });
    else if (!bounds.full && sameEntry(previous, blob)) plan.unchanged.push(blob.path);
    else plan.fetch.push(blob);
  });
  const kept = new Set([...picked, ...plan.skip.map((s) => s.blob)].map((blob) => blob.path));
  const unread = bounds.unread ?? [];
  for (const file of snapshot) {
    if (kept.has(file.path)) continue;
    if (below(file.path, unread)) plan.unchanged.push(file.path);
    else plan.remove.push(file.path);
  }
  return plan;
}

/** A UTF-8 byte-order mark, which JSON.parse refuses and editors on Windows write. */
const BOM = '\uFEFF';

export type DecodedBlob = { ok: true; text: string } | { ok: false; reason: 'binary' | 'nul_byte' };

/**
 * A blob as text a Postgres `text` column takes: valid UTF-8 without a NUL byte. Anything else is
 * a binary file, recorded `skipped` with its reason rather than failing the sync.
 */
export function decodeBlob(bytes: Uint8Array): DecodedBlob {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return { ok: false, reason: 'binary' };
  }
  return text.includes('\u0000') ? { ok: false, reason: 'nul_byte' } : { ok: true, text };
}

/** A fetched file's status: a `.json` manifest must parse; other files are kept as they are. */
export function validateManifest(path: string, content: string): { status: 'ok' } | { status: 'invalid'; error: string } {
  if (!path.endsWith('.json')) return { status: 'ok' };
  try {
    const parsed: unknown = JSON.parse(content.startsWith(BOM) ? content.slice(BOM.length) : content);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return { status: 'invalid', error: 'not a JSON object' };
    return { status: 'ok' };
  } catch (error) {
    return { status: 'invalid', error: `invalid JSON: ${(error as Error).message}`.slice(0, 300) };
  }
}

/** What the sync changed, from the plan and the statuses of the fetched files (a binary one is skipped, not added). */
export function countChanges(
  plan: SyncPlan,
  snapshot: readonly SnapshotFile[],
  fetched: readonly { blob: TreeBlob; status: GithubFileStatus }[],
): GithubSyncCounts {
  const before = new Set(snapshot.map((file) => file.path));
  const kept = fetched.filter((file) => file.status !== 'skipped');
  const fetchedNew = kept.filter((file) => !before.has(file.blob.path)).length;
  return {
    added: fetchedNew,
    changed: kept.length - fetchedNew,
    removed: plan.remove.length,
    skipped: plan.skip.length + (fetched.length - kept.length),
    invalid: fetched.filter((file) => file.status === 'invalid').length,
  };
}
