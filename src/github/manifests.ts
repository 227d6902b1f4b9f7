/**
 * What a target sync keeps of a repository's tree, as pure functions: which paths match the sync
 * globs, which blobs must be fetched against the last snapshot (only those whose blob SHA
 * changed, unless a full resync), and whether a JSON manifest parses.
 */
import type { GithubFileStatus, GithubSyncCounts } from './tables';

/** A blob of the tree at the synced head, as GitHub's trees API lists it. */
export interface TreeBlob {
  path: string;
  sha: string;
  size: number;
}

/** A row of the target's snapshot, as it is before the sync. */
export interface SnapshotFile {
  path: string;
  blobSha: string;
  status: GithubFileStatus;
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
  /** Paths whose blob is unchanged: nothing to do. */
  unchanged: string[];
}

/** The work of one sync: the picked blobs against the snapshot, within the size and count bounds. */
export function planSync(
  picked: readonly TreeBlob[],
  snapshot: readonly SnapshotFile[],
  bounds: { maxFiles: number; maxFileBytes: number; full: boolean },
): SyncPlan {
  const before = new Map(snapshot.map((file) => [file.path, file]));
  const plan: SyncPlan = { fetch: [], skip: [], remove: [], unchanged: [] };
  picked.forEach((blob, index) => {
    const previous = before.get(blob.path);
    if (index >= bounds.maxFiles) plan.skip.push({ blob, reason: 'too_many_files' });
    else if (blob.size > bounds.maxFileBytes) plan.skip.push({ blob, reason: 'too_large' });
    else if (!bounds.full && previous?.blobSha === blob.sha && previous.status !== 'skipped') plan.unchanged.push(blob.path);
    else plan.fetch.push(blob);
  });
  const kept = new Set(picked.map((blob) => blob.path));
  plan.remove = snapshot.filter((file) => !kept.has(file.path)).map((file) => file.path);
  return plan;
}

/** A fetched file's status: a `.json` manifest must parse; other files are kept as they are. */
export function validateManifest(path: string, content: string): { status: 'ok' } | { status: 'invalid'; error: string } {
  if (!path.endsWith('.json')) return { status: 'ok' };
  try {
    const parsed: unknown = JSON.parse(content);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return { status: 'invalid', error: 'not a JSON object' };
    return { status: 'ok' };
  } catch (error) {
    return { status: 'invalid', error: `invalid JSON: ${(error as Error).message}`.slice(0, 300) };
  }
}

/** What the sync changed, from the plan and the statuses of the fetched files. */
export function countChanges(
  plan: SyncPlan,
  snapshot: readonly SnapshotFile[],
  fetched: readonly { status: GithubFileStatus }[],
): GithubSyncCounts {
  const before = new Set(snapshot.map((file) => file.path));
  const fetchedNew = plan.fetch.filter((blob) => !before.has(blob.path)).length;
  return {
    added: fetchedNew,
    changed: plan.fetch.length - fetchedNew,
    removed: plan.remove.length,
    skipped: plan.skip.length,
    invalid: fetched.filter((file) => file.status === 'invalid').length,
  };
}
