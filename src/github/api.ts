/**
 * GitHub's REST API as the sync and the reconcile use it. `@octokit/auth-app` signs the App JWT
 * (RS256) and gets installation tokens, which it caches in memory until shortly before they
 * expire; `@octokit/request` makes the calls against GITHUB_API_BASE_URL. Tokens, the JWT and
 * the key stay inside these two libraries: a failure surfaces only as its status and message.
 */
import { createAppAuth } from '@octokit/auth-app';
import { request as octokitRequest } from '@octokit/request';
import type { GithubFailure } from './api-errors';
import type { TreeBlob } from './manifests';

type Request = typeof octokitRequest;

export interface AppCredentials {
  appId: string;
  privateKey: string;
}

/** A webhook delivery of the App, as GET /app/hook/deliveries lists it. */
export interface HookDelivery {
  id: number;
  guid: string;
  deliveredAt: string;
  redelivery: boolean;
  statusCode: number;
  event: string;
}

/** Bounds the subtree walk of a truncated tree (one call per directory). */
const MAX_TREE_CALLS = 2_000;

interface TreeEntry {
  path: string;
  type: string;
  sha: string;
  size?: number;
}

/** Any thrown value as what classifyGithubFailure reads: a response's status and headers, or none (network). */
export function asGithubFailure(error: unknown): GithubFailure {
  const e = error as { status?: number; response?: { headers?: Record<string, string | number | undefined> }; message?: string };
  if (e?.response === undefined) return { message: e?.message ?? String(error) };
  return { status: e.status, headers: e.response.headers, message: e.message ?? `HTTP ${e.status}` };
}

const [splitOwner, splitName] = [(r: string) => r.split('/')[0]!, (r: string) => r.split('/')[1]!];

/** The App's own routes (authenticated with the App JWT): its webhook delivery log. */
function appCalls(app: Request) {
  return {
    /** The App's webhook deliveries at or after `since` (ms), newest first, following the cursor. */
    async deliveriesSince(since: number, maxPages = 50): Promise<HookDelivery[]> {
      const found: HookDelivery[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < maxPages; page++) {
        const response = await app('GET /app/hook/deliveries', { per_page: 100, ...(cursor ? { cursor } : {}) });
        const rows = response.data as {
          id: number;
          guid: string;
          delivered_at: string;
          redelivery: boolean;
          status_code: number;
          event: string;
        }[];
        for (const row of rows) {
          if (Date.parse(row.delivered_at) < since) return found;
          found.push({
            id: row.id,
            guid: row.guid,
            deliveredAt: row.delivered_at,
            redelivery: row.redelivery,
            statusCode: row.status_code,
            event: row.event,
          });
        }
        cursor = /[?&]cursor=([^&>]+)[^>]*>;\s*rel="next"/.exec(String(response.headers.link ?? ''))?.[1];
        if (!cursor || rows.length === 0) return found;
      }
      return found;
    },
    async redeliver(deliveryId: number): Promise<void> {
      await app('POST /app/hook/deliveries/{delivery_id}/attempts', { delivery_id: deliveryId });
    },
  };
}

export function createGithubApi(credentials: AppCredentials, baseUrl: string) {
  const base = octokitRequest.defaults({
    baseUrl,
    headers: { 'user-agent': 'den-control-plane', 'x-github-api-version': '2022-11-28' },
  });
  const appAuth = createAppAuth({ ...credentials, request: base });
  const app = base.defaults({ request: { hook: appAuth.hook } });
  const installations = new Map<number, Request>();
  /** One authenticated client per installation: its token cache lives as long as the process. */
  function forInstallation(installationId: number): Request {
    let client = installations.get(installationId);
    if (!client) {
      const auth = createAppAuth({ ...credentials, installationId, request: base });
      client = base.defaults({ request: { hook: auth.hook } });
      installations.set(installationId, client);
    }
    return client;
  }

  async function treeLevel(client: Request, repository: string, sha: string, recursive: boolean) {
    const params = { owner: splitOwner(repository), repo: splitName(repository), tree_sha: sha, ...(recursive ? { recursive: '1' } : {}) };
    const { data } = await client('GET /repos/{owner}/{repo}/git/trees/{tree_sha}', params);
    return data as { sha: string; truncated: boolean; tree: TreeEntry[] };
  }

  /** Every blob of the tree at `sha`; a truncated recursive listing is completed by walking each subtree. */
  async function tree(installationId: number, repository: string, sha: string): Promise<TreeBlob[]> {
    const client = forInstallation(installationId);
    const whole = await treeLevel(client, repository, sha, true);
    const blobs = (entries: TreeEntry[], prefix: string) =>
      entries.filter((e) => e.type === 'blob').map((e) => ({ path: prefix + e.path, sha: e.sha, size: e.size ?? 0 }));
    if (!whole.truncated) return blobs(whole.tree, '');
    const found: TreeBlob[] = [];
    const queue: { sha: string; prefix: string }[] = [{ sha: whole.sha, prefix: '' }];
    for (let calls = 0; queue.length > 0; calls++) {
      if (calls >= MAX_TREE_CALLS) throw Object.assign(new Error('tree too large to walk'), { status: 422, response: { headers: {} } });
      const next = queue.shift()!;
      const level = await treeLevel(client, repository, next.sha, false);
      found.push(...blobs(level.tree, next.prefix));
      for (const sub of level.tree.filter((e) => e.type === 'tree')) queue.push({ sha: sub.sha, prefix: `${next.prefix}${sub.path}/` });
    }
    return found;
  }

  return {
    /** The repository as the installation sees it; GitHub answers 404 when the installation cannot reach it. */
    async repository(installationId: number, repository: string): Promise<{ id: number; fullName: string }> {
      const { data } = await forInstallation(installationId)('GET /repos/{owner}/{repo}', {
        owner: splitOwner(repository),
        repo: splitName(repository),
      });
      const repo = data as { id: number; full_name: string };
      return { id: repo.id, fullName: repo.full_name };
    },
    /** The commit a branch points at now (`refs/heads/x` or `x`). */
    async branchHead(installationId: number, repository: string, branch: string): Promise<string> {
      const ref = `heads/${branch.replace(/^refs\/heads\//, '')}`;
      const { data } = await forInstallation(installationId)('GET /repos/{owner}/{repo}/git/ref/{ref}', {
        owner: splitOwner(repository),
        repo: splitName(repository),
        ref,
      });
      return (data as { object: { sha: string } }).object.sha;
    },
    tree,
    /** A blob's content as text (GitHub sends it base64). */
    async blob(installationId: number, repository: string, sha: string): Promise<string> {
      const { data } = await forInstallation(installationId)('GET /repos/{owner}/{repo}/git/blobs/{file_sha}', {
        owner: splitOwner(repository),
        repo: splitName(repository),
        file_sha: sha,
      });
      const blob = data as { content: string; encoding: string };
      return blob.encoding === 'base64' ? Buffer.from(blob.content, 'base64').toString('utf8') : blob.content;
    },
    ...appCalls(app),
  };
}

export type GithubApi = ReturnType<typeof createGithubApi>;
