/**
 * GitHub's REST API as the sync and the reconcile use it. `@octokit/auth-app` signs the App JWT
 * (RS256) and gets installation tokens, which it caches in memory; `@octokit/request` makes the
 * calls against GITHUB_API_BASE_URL. Tokens, the JWT and the key stay inside these two libraries:
 * a failure surfaces only as its status and message.
 *
 * An installation token is renewed before its `expires_at` (the library keeps a token 59 minutes
 * whatever GitHub says), and a 401 answered to a cached token drops it and asks once more with a
 * new one: a token GitHub revoked would otherwise fail every call until it left the cache.
 */
import { createAppAuth } from '@octokit/auth-app';
import { request as octokitRequest } from '@octokit/request';
import type { GithubFailure } from './api-errors';
import type { TreeBlob } from './manifests';

type Request = typeof octokitRequest;
type Params = Record<string, unknown>;

export interface AppCredentials {
  appId: string;
  privateKey: string;
}

/** A repository as an installation reads it (a target is one). */
export interface RepoRef {
  installationId: number;
  /** `owner/name`. */
  repository: string;
}

/** A webhook delivery of the App, as GET /app/hook/deliveries lists it. */
export interface HookDelivery {
  id: number;
  guid: string;
  deliveredAt: string;
  redelivery: boolean;
  /** 0 when nothing answered (a timeout or a connection error). */
  statusCode: number;
  event: string;
}

/** One page of the delivery log, newest first, and the cursor of the next (older) page. */
export interface DeliveryPage {
  deliveries: HookDelivery[];
  next: string | null;
}

/** What a tree walk may read: the directories below which a kept path can lie, and at most `maxRequests` tree reads. */
export interface TreeWalk {
  canHold: (dir: string) => boolean;
  maxRequests: number;
}

/**
 * What a walk found: files (mode `100644` or `100755`), symbolic links (`120000`, each a blob
 * holding the path it names), submodules (`160000`, each with its commit's SHA) and directories;
 * the reads it took, and the directories it had to leave unread (at its bound).
 */
export interface TreeRead {
  blobs: TreeBlob[];
  links: TreeBlob[];
  submodules: { path: string; sha: string }[];
  dirs: string[];
  requests: number;
  unread: string[];
}

/** How GitHub relates two commits: `ahead` when `head` descends from `base`. */
export type Ancestry = 'ahead' | 'behind' | 'diverged' | 'identical';

interface TreeEntry {
  path: string;
  mode: string;
  type: string;
  sha: string;
  size?: number;
}

/** Git's modes of a symbolic link and of a submodule (a gitlink). */
const LINK_MODE = '120000';
const SUBMODULE_MODE = '160000';

/** A call that hangs is cut here and retried like any network error. */
const REQUEST_TIMEOUT_MS = 60_000;
/** An installation token this close to its `expires_at` is renewed before it is used. */
const TOKEN_RENEW_MARGIN_MS = 5 * 60_000;

/** What GitHub's refusal of an installation token says the installation became. */
export type InstallationRefusal = 'suspend' | 'deleted';

/**
 * GitHub refused the installation a token: it is suspended (403 "This installation has been
 * suspended") or gone (404). It is GitHub's HTTP answer like any other (`HttpError`, with its
 * status and headers), and tells the sync and the reconcile to record the installation's state
 * rather than fail each of its targets' syncs one by one.
 */
export class InstallationRefusedError extends Error {
  override readonly name = 'HttpError';
  readonly status: number;
  readonly response: { headers: Record<string, string | number | undefined> };

  constructor(
    readonly installationId: number,
    readonly refusal: InstallationRefusal,
    answer: { status: number; message: string; headers: Record<string, string | number | undefined> },
  ) {
    super(answer.message);
    this.status = answer.status;
    this.response = { headers: answer.headers };
  }
}

/** A refusal that says what became of the installation is rethrown, before a caller reads a 403 or 404 as its own. */
export function rethrowRefusal(error: unknown): void {
  if (error instanceof InstallationRefusedError) throw error;
}

/** The token request's failure, as an installation refused when GitHub's answer says it is suspended or gone. */
function tokenFailure(installationId: number, error: unknown): unknown {
  if ((error as Error)?.name !== 'HttpError') return error;
  const failure = asGithubFailure(error);
  const answer = { status: failure.status ?? 0, message: failure.message, headers: failure.headers ?? {} };
  if (failure.status === 404) return new InstallationRefusedError(installationId, 'deleted', answer);
  if (failure.status === 403 && /suspended/i.test(failure.message)) return new InstallationRefusedError(installationId, 'suspend', answer);
  return error;
}

/** Whether an error came from a call to GitHub (an HTTP answer, a network failure or a timeout), rather than from our own code. */
export function isGithubCallError(error: unknown): boolean {
  const name = (error as Error | undefined)?.name;
  return name === 'HttpError' || name === 'TimeoutError' || name === 'AbortError';
}

/** Any thrown value as what classifyGithubFailure reads: a response's status and headers, or none (network). */
export function asGithubFailure(error: unknown): GithubFailure {
  const e = error as { status?: number; response?: { headers?: Record<string, string | number | undefined> }; message?: string };
  if (e?.response === undefined) return { message: e?.message ?? String(error) };
  return { status: e.status, headers: e.response.headers, message: e.message ?? `HTTP ${e.status}` };
}

const [splitOwner, splitName] = [(r: string) => r.split('/')[0]!, (r: string) => r.split('/')[1]!];
const repoParams = (repository: string) => ({ owner: splitOwner(repository), repo: splitName(repository) });
const timed = <P extends Params>(params: P): P => ({ ...params, request: { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) } });

function hookDelivery(row: Record<string, unknown>): HookDelivery {
  return {
    id: Number(row.id),
    guid: String(row.guid),
    deliveredAt: String(row.delivered_at),
    redelivery: row.redelivery === true,
    statusCode: Number(row.status_code ?? 0),
    event: String(row.event),
  };
}

/** The App's own routes (authenticated with the App JWT): its webhook delivery log. */
function appCalls(app: Request) {
  return {
    /** One page of the App's deliveries (newest first), from the top of the log or from `cursor`. */
    async deliveriesPage(cursor: string | null): Promise<DeliveryPage> {
      const response = await app('GET /app/hook/deliveries', timed({ per_page: 100, ...(cursor ? { cursor } : {}) }));
      const rows = response.data as Record<string, unknown>[];
      const next = /[?&]cursor=([^&>]+)[^>]*>;\s*rel="next"/.exec(String(response.headers.link ?? ''))?.[1];
      return { deliveries: rows.map(hookDelivery), next: next && rows.length > 0 ? decodeURIComponent(next) : null };
    },
    /** What the service answered one attempt: its status and body, as GitHub recorded them. */
    async deliveryAnswer(deliveryId: number): Promise<{ statusCode: number; body: string | null }> {
      const { data } = await app('GET /app/hook/deliveries/{delivery_id}', timed({ delivery_id: deliveryId }));
      const row = data as { status_code?: number; response?: { payload?: unknown } };
      const payload = row.response?.payload;
      return { statusCode: Number(row.status_code ?? 0), body: typeof payload === 'string' ? payload : null };
    },
    async redeliver(deliveryId: number): Promise<void> {
      await app('POST /app/hook/deliveries/{delivery_id}/attempts', timed({ delivery_id: deliveryId }));
    },
  };
}

/** One authenticated client per installation, renewing its token before `expires_at` and once after a 401. */
function installationClients(credentials: AppCredentials, base: Request, now: () => number) {
  const clients = new Map<number, { request: Request; auth: ReturnType<typeof createAppAuth> }>();
  const clientOf = (installationId: number) => {
    let client = clients.get(installationId);
    if (!client) {
      const auth = createAppAuth({ ...credentials, installationId, request: base });
      client = { auth, request: base.defaults({ request: { hook: auth.hook } }) };
      clients.set(installationId, client);
    }
    return client;
  };
  /** The installation's token, renewed when it is within TOKEN_RENEW_MARGIN_MS of its `expires_at`. */
  const authorize = async (installationId: number) => {
    const client = clientOf(installationId);
    try {
      const token = (await client.auth({ type: 'installation' })) as { expiresAt?: string };
      if (token.expiresAt !== undefined && Date.parse(token.expiresAt) - now() < TOKEN_RENEW_MARGIN_MS) {
        await client.auth({ type: 'installation', refresh: true });
      }
    } catch (error) {
      throw tokenFailure(installationId, error);
    }
    return client;
  };
  return async function call(installationId: number, route: string, params: Params) {
    const client = await authorize(installationId);
    try {
      return await client.request(route, timed(params));
    } catch (error) {
      if ((error as { status?: number }).status !== 401) throw error;
      clients.delete(installationId);
      return (await authorize(installationId)).request(route, timed(params));
    }
  };
}

type InstallationCall = ReturnType<typeof installationClients>;

function treeCalls(call: InstallationCall) {
  async function level(repo: RepoRef, sha: string, recursive: boolean) {
    const params = { ...repoParams(repo.repository), tree_sha: sha, ...(recursive ? { recursive: '1' } : {}) };
    const { data } = await call(repo.installationId, 'GET /repos/{owner}/{repo}/git/trees/{tree_sha}', params);
    return data as { sha: string; truncated: boolean; tree: TreeEntry[] };
  }
  /**
   * Every blob of the tree at `sha` below a directory that can hold a kept path. A recursive read
   * GitHub truncated (past 100,000 entries or 7 MB) is kept for what it gave, and completed by
   * reading each such directory: recursively first, one level when that is truncated too. The
   * walk stops at `walk.maxRequests` reads and names the directories it left unread.
   */
  return async function tree(repo: RepoRef, sha: string, walk: TreeWalk): Promise<TreeRead> {
    const found = { blobs: new Map<string, TreeBlob>(), links: new Map<string, TreeBlob>(), submodules: new Map<string, string>() };
    const dirs = new Set<string>();
    const keep = (entries: TreeEntry[], prefix: string) => {
      for (const e of entries) {
        const path = prefix + e.path;
        if (e.mode === SUBMODULE_MODE) found.submodules.set(path, e.sha);
        else if (e.type === 'tree') dirs.add(path);
        else if (e.type === 'blob') (e.mode === LINK_MODE ? found.links : found.blobs).set(path, { path, sha: e.sha, size: e.size ?? 0 });
      }
    };
    const whole = await level(repo, sha, true);
    keep(whole.tree, '');
    const read: TreeRead = { blobs: [], links: [], submodules: [], dirs: [], requests: 1, unread: [] };
    const queue: { sha: string; dir: string; recursiveRead: boolean }[] = whole.truncated
      ? [{ sha: whole.sha, dir: '', recursiveRead: true }]
      : [];
    while (queue.length > 0) {
      if (read.requests >= walk.maxRequests) break;
      const next = queue.shift()!;
      const prefix = next.dir === '' ? '' : `${next.dir}/`;
      if (!next.recursiveRead) {
        const sub = await level(repo, next.sha, true);
        read.requests += 1;
        keep(sub.tree, prefix);
        if (!sub.truncated) continue;
        if (read.requests >= walk.maxRequests) {
          queue.unshift({ ...next, recursiveRead: true });
          break;
        }
      }
      const one = await level(repo, next.sha, false);
      read.requests += 1;
      keep(one.tree, prefix);
      for (const e of one.tree)
        if (e.type === 'tree' && walk.canHold(prefix + e.path)) queue.push({ sha: e.sha, dir: prefix + e.path, recursiveRead: false });
    }
    read.unread = queue.map((q) => q.dir);
    read.blobs = [...found.blobs.values()];
    read.links = [...found.links.values()];
    read.submodules = [...found.submodules].map(([path, commit]) => ({ path, sha: commit }));
    read.dirs = [...dirs];
    return read;
  };
}

export function createGithubApi(credentials: AppCredentials, baseUrl: string, options: { now?: () => number } = {}) {
  const base = octokitRequest.defaults({
    baseUrl,
    headers: { 'user-agent': 'den-control-plane', 'x-github-api-version': '2022-11-28' },
  });
  const appAuth = createAppAuth({ ...credentials, request: base });
  const app = base.defaults({ request: { hook: appAuth.hook } });
  const call = installationClients(credentials, base, options.now ?? Date.now);

  return {
    /** The repository as the installation sees it; GitHub answers 404 when the installation cannot reach it. */
    async repository(repo: RepoRef): Promise<{ id: number; fullName: string; defaultBranch: string | null }> {
      const { data } = await call(repo.installationId, 'GET /repos/{owner}/{repo}', repoParams(repo.repository));
      const found = data as { id: number; full_name: string; default_branch?: string };
      return { id: found.id, fullName: found.full_name, defaultBranch: found.default_branch ?? null };
    },
    /** The commit a branch points at now (`refs/heads/x` or `x`); 404 when there is no such branch, 409 for an empty repository. */
    async branchHead(repo: RepoRef, branch: string): Promise<string> {
      const ref = `heads/${branch.replace(/^refs\/heads\//, '')}`;
      const { data } = await call(repo.installationId, 'GET /repos/{owner}/{repo}/git/ref/{ref}', { ...repoParams(repo.repository), ref });
      return (data as { object: { sha: string } }).object.sha;
    },
    /** How `head` relates to `base` (GET /repos/{owner}/{repo}/compare/{base}...{head}). */
    async compare(repo: RepoRef, shas: { base: string; head: string }): Promise<Ancestry> {
      const params = { ...repoParams(repo.repository), basehead: `${shas.base}...${shas.head}`, per_page: 1 };
      const { data } = await call(repo.installationId, 'GET /repos/{owner}/{repo}/compare/{basehead}', params);
      return (data as { status: Ancestry }).status;
    },
    tree: treeCalls(call),
    /** A blob's bytes (GitHub sends them base64). */
    async blob(repo: RepoRef, sha: string): Promise<Buffer> {
      const params = { ...repoParams(repo.repository), file_sha: sha };
      const { data } = await call(repo.installationId, 'GET /repos/{owner}/{repo}/git/blobs/{file_sha}', params);
      const blob = data as { content: string; encoding: string };
      return blob.encoding === 'base64' ? Buffer.from(blob.content, 'base64') : Buffer.from(blob.content, 'utf8');
    },
    ...appCalls(app),
  };
}

export type GithubApi = ReturnType<typeof createGithubApi>;
