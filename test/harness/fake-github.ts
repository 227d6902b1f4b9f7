/**
 * A fake GitHub on 127.0.0.1 for the target sync, the reconcile (the App's delivery log, and
 * redeliveries that really send the logged delivery again) and the App's install flow. It serves
 * both hosts on one origin, as GitHub Enterprise Server does: the REST API (also under `/api/v3`)
 * and the web pages the flow uses (the App's install page, the OAuth code exchange).
 *
 * It speaks the real wire format and is as strict as GitHub:
 * - credentials: the App JWT (RS256) is verified with the App's public key on the App routes, the
 *   installation token on every repository call (refused once past its `expires_at`, or revoked),
 *   the user token on `GET /user/installations`, and the client id, client secret, code (single
 *   use, ten minutes, of this client) and redirect URI on the code exchange, which answers
 *   GitHub's own OAuth errors;
 * - git (test/harness/fake-github-git.ts): recursive trees truncated past 100,000 entries or 7 MB
 *   (or a lower count a test sets), blobs of any bytes, a 404 for a missing branch and a 409 for an
 *   empty repository, compare with real ancestry, heads moved without a push, force-pushes, and
 *   ref reads that lag behind a push;
 * - installations: a token only for an installation GitHub knows (404 otherwise, and for a deleted
 *   one), GitHub's 403 "This installation has been suspended" for a suspended one (whose tokens are
 *   revoked, as a deleted one's);
 * - rate limits: every installation call carries `x-ratelimit-*` headers from the installation's
 *   hourly budget, answers GitHub's primary-limit 403 once it is spent, and secondary limits (403
 *   or 429) with or without `retry-after` when a test asks; the App's own routes (the delivery
 *   log, redeliveries, tokens) likewise from the App's budget, and past GitHub's 900 points a
 *   minute (a GET 1, a POST 5) with a secondary-limit 403 and `retry-after`;
 * - the App's delivery log: paged newest first with opaque cursors in the Link header, each
 *   delivery's answer kept for its detail, redeliveries logged as new attempts, deliveries that
 *   always fail, redeliveries refused past GitHub's three days, and GitHub's 422 "the endpoint has
 *   been spammed" when a test asks.
 *
 * It records every call and every token it issued, can answer scripted failures, and counts
 * overlapping requests for one repository (two syncs of one target at once would overlap, since
 * every answer is delayed). Its clock can be injected, to move past a rate limit's reset.
 */
import { generateKeyPairSync, randomBytes, randomInt, verify, type KeyObject } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { GitStore, TREE_LIMITS, type GitContent } from './fake-github-git';

export { gitBlobSha } from './fake-github-git';

export interface FakeGithubCall {
  method: string;
  path: string;
  /** `owner/name` for repository routes. */
  repository?: string;
  /** The installation whose token the call carried. */
  installationId?: number;
  kind:
    | 'token'
    | 'repo'
    | 'ref'
    | 'tree'
    | 'blob'
    | 'compare'
    | 'deliveries'
    | 'delivery'
    | 'redeliver'
    | 'install_page'
    | 'oauth_token'
    | 'user_installations'
    | 'other';
  status: number;
  /** Which credential the Authorization header carried (an App JWT, an installation or user token), never the secret itself. */
  auth: 'jwt' | 'token' | 'user' | 'none' | 'invalid';
  /** The fake's clock when the call came. */
  at: number;
}

interface ScriptedFailure {
  match: (call: Pick<FakeGithubCall, 'kind' | 'repository' | 'path' | 'installationId'>) => boolean;
  status: number;
  headers?: Record<string, string>;
  message?: string;
  times: number;
}

interface Repo {
  id: number;
  /** As first committed: GitHub keeps a repository's case, and matches names without it. */
  fullName: string;
  installationId: number;
  branches: Map<string, string>;
  defaultBranch: string;
  /** Recursive listings stop at this many entries (GitHub: 100,000, or 7 MB). */
  treeEntries: number;
  /** Ref reads that still answer older heads, per branch, one each. */
  lags: Map<string, string[]>;
}

/** A webhook delivery as GitHub's App delivery log lists it, with the answer it got. */
export interface FakeDelivery {
  id: number;
  guid: string;
  delivered_at: string;
  redelivery: boolean;
  status: string;
  status_code: number;
  event: string;
  action: string | null;
  duration: number;
  /** What the service answered (kept for GET /app/hook/deliveries/{id}). */
  response: { body: string | null };
}

/** A webhook request as it was sent, kept so a redelivery sends the same GUID, body and signature. */
export interface LoggedRequest {
  event: string;
  guid: string;
  raw: string;
  signature: string;
}

/** What the service answered a delivery: its status and body. */
export interface DeliveryAnswer {
  status: number;
  body?: string | null;
}

export interface FakeGithub {
  url: string;
  appId: string;
  /** The App's private key (PKCS#8 PEM), for the service's settings. */
  privateKey: string;
  /** The App's slug (its page is /apps/{slug}) and its OAuth client, for the install flow's settings. */
  slug: string;
  clientId: string;
  clientSecret: string;
  /** The App's Callback URL, as set in its settings: where the install page sends the installer. */
  callbackUrl?: string;
  calls: FakeGithubCall[];
  /** Tokens handed out, installation and user tokens alike (for the tests that check none reaches the logs). */
  issuedTokens: string[];
  /** A GitHub user; the install page knows who is signed in by the `fake_github_user` cookie. */
  addUser(login: string): void;
  /** An installation of the App on `account`, listed by GET /user/installations for `users`; returns its id. */
  addInstallation(account: string, users: string[]): number;
  /** A code for `login`, as the install page issues it after the installation (ten minutes, single use). */
  issueCode(login: string): string;
  /** GitHub's id of a repository the fake holds. */
  repositoryId(repository: string): number;
  /** The repository's default branch (the branch of its first commit, or as set). */
  defaultBranch(repository: string): string;
  /** The most concurrent requests any one repository saw. */
  maxConcurrentPerRepository(): number;
  /**
   * Commits `files` (the whole tree; a Buffer is a file's bytes, `{symlink}` a link, `{submodule}` a
   * submodule's commit) as the new head of `branch`;
   * returns the commit SHA. Its parent is the branch's head, or `parent` (null: a history of its
   * own, as a force-push to unrelated work).
   */
  commit(repository: string, installationId: number, branch: string, files: Record<string, GitContent>, parent?: string | null): string;
  /** A repository without a commit: GitHub answers 409 "Git Repository is empty." on its git routes. */
  createEmptyRepository(repository: string, installationId: number, defaultBranch?: string): void;
  /** Moves a branch without a push (a force-push, or a push whose delivery is lost). */
  setHead(repository: string, branch: string, sha: string): void;
  deleteBranch(repository: string, branch: string): void;
  /** Renames a branch, as GitHub's rename does (the default branch follows). */
  renameBranch(repository: string, from: string, to: string): void;
  /** The next reads of the branch's ref answer these heads, one each, before the real one (replicas behind the push). */
  lagRefReads(repository: string, branch: string, shas: string[]): void;
  /** The tree API answers `truncated: true` for this repository's recursive reads past `entries` (default: only the top level). */
  truncate(repository: string, entries?: number): void;
  /** The next `times` calls that `match` accepts get `status`, with `headers` and `message`. */
  fail(match: ScriptedFailure['match'], status: number, times?: number, headers?: Record<string, string>, message?: string): void;
  /** Forgets every scripted failure not used up. */
  clearFailures(): void;
  /** Spends the installation's (or the App's own) hourly budget: its calls get GitHub's primary-limit 403 until `resetInMs` from now. */
  exhaustRateLimit(installationId: number | 'app', resetInMs: number): void;
  /** The next `times` calls of the installation get a secondary limit: 403 (or 429), with `retry-after` only when given. */
  secondaryRateLimit(installationId: number | 'app', options?: { times?: number; status?: 403 | 429; retryAfterSeconds?: number }): void;
  /** The next `times` redeliveries get GitHub's 422 "Validation failed, or the endpoint has been spammed." */
  spamRedeliveries(times: number): void;
  /**
   * An installation GitHub knows, though no repository of the fake is on it yet (a token is issued
   * only for one it knows: an installation holding a repository, one made by `addInstallation`, or
   * one named here).
   */
  install(installationId: number): void;
  /** Suspends the installation: its token requests get GitHub's 403 "This installation has been suspended", its tokens are revoked. */
  suspendInstallation(installationId: number): void;
  unsuspendInstallation(installationId: number): void;
  /** Deletes the installation: its token requests get 404, its tokens are revoked. */
  deleteInstallation(installationId: number): void;
  /** Revokes every token issued to the installation: GitHub answers them 401 Bad credentials. */
  revokeTokens(installationId: number): void;
  deliveries: FakeDelivery[];
  /** Ids passed to POST /app/hook/deliveries/{id}/attempts, in order. */
  redeliveryRequests: number[];
  /** Logs a delivery the test sent, with what the service answered (or a status); returns its delivery id. */
  logDelivery(request: LoggedRequest, answer: number | DeliveryAnswer, options?: { deliveredAt?: number }): number;
  /** Redeliveries of this GUID never reach the service: GitHub logs each as failed with `answer`. */
  alwaysFail(guid: string, answer: DeliveryAnswer): void;
  /** Where redeliveries go: sends the logged request again and resolves to the service's answer. */
  redeliverTo?: (request: LoggedRequest) => Promise<number | DeliveryAnswer>;
  /** The fake's clock (epoch ms). */
  now(): number;
  close(): Promise<void>;
}

/** GitHub's hourly budget of an installation's requests (the fake gives the App's own JWT calls the same). */
const HOURLY_BUDGET = 5000;
/** The budgets map's key for the App's own calls (its JWT): installation ids are positive. */
const APP_BUDGET = 0;
/** GitHub's secondary limit on points a minute (a GET 1, a POST 5), kept here for the App's routes. */
const POINTS_PER_MINUTE = 900;
/** GitHub redelivers a delivery for three days. */
const REDELIVERY_WINDOW_MS = 3 * 24 * 3600_000;

/** The App JWT's verdict, as GitHub gives it: a bad signature, or a time claim off GitHub's clock. */
function verifyJwt(token: string, publicKey: KeyObject, appId: string, nowS: number): 'ok' | 'invalid' | 'expired' | 'issued_in_future' {
  const [header, payload, signature] = token.split('.');
  if (!header || !payload || !signature) return 'invalid';
  const ok = verify('RSA-SHA256', Buffer.from(`${header}.${payload}`), publicKey, Buffer.from(signature, 'base64url'));
  if (!ok) return 'invalid';
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { iss?: unknown; exp?: number; iat?: number };
  const alg = (JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as { alg?: string }).alg;
  if (alg !== 'RS256' || String(claims.iss) !== appId) return 'invalid';
  if ((claims.exp ?? 0) <= nowS) return 'expired';
  return (claims.iat ?? Infinity) <= nowS + 60 ? 'ok' : 'issued_in_future';
}

/** GitHub's words for a JWT whose time claims are off its clock (an App reads them to correct its skew). */
const JWT_TIME_ERRORS = {
  expired: "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
  issued_in_future: "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
};

interface Installation {
  id: number;
  account: string;
  users: Set<string>;
}

interface Budget {
  used: number;
  resetAt: number;
  secondary: { times: number; status: 403 | 429; retryAfterSeconds?: number }[];
}

/** A call to the App's routes the points limit counted: when, and its points. */
interface Spent {
  at: number;
  points: number;
}

interface State {
  appId: string;
  publicKey: KeyObject;
  now: () => number;
  tokens: Map<string, { installationId: number; expiresAt: number; revoked: boolean }>;
  tokenLifetimeMs: number;
  /** User access tokens, to their user's login. */
  userTokens: Map<string, string>;
  codes: Map<string, { login: string; expiresAt: number; used: boolean }>;
  users: Map<string, number>;
  installations: Map<number, Installation>;
  /** Installations known without an account (named by a test, or holding a repository), suspended ones, deleted ones. */
  installed: Set<number>;
  suspended: Set<number>;
  deleted: Set<number>;
  budgets: Map<number, Budget>;
  /** The App's calls in the last minute, for GitHub's secondary limit on points. */
  appPoints: Spent[];
  spammed: number;
  repos: Map<string, Repo>;
  git: GitStore;
  failures: ScriptedFailure[];
  inFlight: Map<string, number>;
  maxInFlight: number;
  /** The request behind each logged delivery id. */
  logged: Map<number, LoggedRequest>;
  alwaysFailing: Map<string, DeliveryAnswer>;
  fake: FakeGithub;
}

/** A JSON body, or `text` (an HTML page, a form-encoded OAuth answer). */
type Answer = { status: number; body?: unknown; text?: string; headers?: Record<string, string> };

function reply(res: http.ServerResponse, answer: Answer, date: number): void {
  // GitHub's clock, which a test may have moved.
  res.sendDate = false;
  const headers = { date: new Date(date).toUTCString(), ...answer.headers };
  if (answer.text !== undefined) {
    res.writeHead(answer.status, { 'content-type': 'text/html; charset=utf-8', ...headers });
    res.end(answer.text);
    return;
  }
  res.writeHead(answer.status, { 'content-type': 'application/json', ...headers });
  res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
}

const notFound: Answer = { status: 404, body: { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' } };
const badCredentials: Answer = { status: 401, body: { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' } };

/** Who is calling: the App (a JWT that verifies), an installation or a user (a live token it issued), or nobody. */
function authOf(
  state: State,
  authorization: string | undefined,
): { kind: FakeGithubCall['auth']; installationId?: number; login?: string; jwtError?: string } {
  if (!authorization) return { kind: 'none' };
  const [scheme, credential] = authorization.split(' ');
  if (scheme?.toLowerCase() === 'bearer' && credential && credential.split('.').length === 3) {
    // The App JWT is made by @octokit/auth-app on the real clock, whatever clock a test injected.
    const verdict = verifyJwt(credential, state.publicKey, state.appId, Math.floor(Date.now() / 1000));
    if (verdict === 'ok') return { kind: 'jwt' };
    return { kind: 'invalid', ...(verdict === 'invalid' ? {} : { jwtError: JWT_TIME_ERRORS[verdict] }) };
  }
  if (credential === undefined) return { kind: 'invalid' };
  const login = state.userTokens.get(credential);
  if (login !== undefined) return { kind: 'user', login };
  const token = state.tokens.get(credential);
  if (!token) return { kind: 'invalid' };
  if (token.revoked || token.expiresAt <= state.now()) return { kind: 'invalid', installationId: token.installationId };
  return { kind: 'token', installationId: token.installationId };
}

// ---------------------------------------------------------------------------------------
// Repositories: refs, trees, blobs, compare.

const REPO_ROUTE =
  /^\/repos\/([^/]+\/[^/]+?)(?:\/(git\/ref\/heads\/(.+)|commits\/(.+)|git\/trees\/([0-9a-f]{40})|git\/blobs\/([0-9a-f]{40})|compare\/([0-9a-f]{40})\.\.\.([0-9a-f]{40})))?$/;

function classify(method: string, path: string): { kind: FakeGithubCall['kind']; repository?: string; match?: RegExpExecArray } {
  if (method === 'POST' && /^\/app\/installations\/\d+\/access_tokens$/.test(path)) return { kind: 'token' };
  if (method === 'GET' && path === '/app/hook/deliveries') return { kind: 'deliveries' };
  if (method === 'GET' && /^\/app\/hook\/deliveries\/\d+$/.test(path)) return { kind: 'delivery' };
  if (method === 'POST' && /^\/app\/hook\/deliveries\/\d+\/attempts$/.test(path)) return { kind: 'redeliver' };
  if (method === 'GET' && /^\/apps\/[^/]+\/installations\/new$/.test(path)) return { kind: 'install_page' };
  if (method === 'POST' && path === '/login/oauth/access_token') return { kind: 'oauth_token' };
  if (method === 'GET' && path === '/user/installations') return { kind: 'user_installations' };
  const match = method === 'GET' ? REPO_ROUTE.exec(path) : null;
  if (!match) return { kind: 'other' };
  const kind =
    match[2] === undefined
      ? 'repo'
      : match[3] !== undefined || match[4] !== undefined
        ? 'ref'
        : match[5] !== undefined
          ? 'tree'
          : match[6] !== undefined
            ? 'blob'
            : 'compare';
  return { kind, repository: match[1]!.toLowerCase(), match };
}

const emptyRepository: Answer = {
  status: 409,
  body: { message: 'Git Repository is empty.', documentation_url: 'https://docs.github.com/rest' },
};

function answerRef(state: State, repo: Repo, m: RegExpExecArray): Answer {
  if (repo.branches.size === 0) return emptyRepository;
  const branch = decodeURIComponent(m[3] ?? m[4]!).replace(/^refs\/heads\//, '');
  let sha = repo.branches.get(branch);
  if (sha === undefined) return notFound;
  const lagging = repo.lags.get(branch)?.shift();
  if (lagging !== undefined) sha = lagging;
  return m[3] !== undefined
    ? { status: 200, body: { ref: `refs/heads/${branch}`, object: { sha, type: 'commit' } } }
    : { status: 200, body: { sha, commit: { tree: { sha: state.git.rootSha(sha) } } } };
}

function answerTree(state: State, repo: Repo, sha: string, recursive: boolean, base: string): Answer {
  if (repo.branches.size === 0) return emptyRepository;
  const node = state.git.tree(sha);
  if (!node) return notFound;
  const listing = state.git.listing(node, recursive, base, recursive ? { ...TREE_LIMITS, entries: repo.treeEntries } : TREE_LIMITS);
  return { status: 200, body: { sha: node.sha, url: `${base}/git/trees/${node.sha}`, truncated: listing.truncated, tree: listing.tree } };
}

function answerRepo(state: State, route: ReturnType<typeof classify>, installationId: number | undefined, url: URL): Answer {
  const repo = state.repos.get(route.repository!);
  if (!repo || repo.installationId !== installationId) return notFound;
  const m = route.match!;
  const base = `${url.origin}/repos/${repo.fullName}`;
  if (route.kind === 'repo') {
    const [owner, name] = repo.fullName.split('/') as [string, string];
    const body = {
      id: repo.id,
      name,
      full_name: repo.fullName,
      private: true,
      owner: { login: owner },
      default_branch: repo.defaultBranch,
    };
    return { status: 200, body };
  }
  if (route.kind === 'ref') return answerRef(state, repo, m);
  if (route.kind === 'tree') return answerTree(state, repo, m[5]!, url.searchParams.get('recursive') === '1', base);
  if (route.kind === 'compare') {
    if (repo.branches.size === 0) return emptyRepository;
    const status = state.git.compare(m[7]!, m[8]!);
    return status === undefined
      ? notFound
      : { status: 200, body: { status, ahead_by: status === 'ahead' ? 1 : 0, commits: [], files: [] } };
  }
  const bytes = state.git.blob(m[6]!);
  if (!bytes) return notFound;
  return { status: 200, body: { sha: m[6], size: bytes.length, encoding: 'base64', content: bytes.toString('base64') } };
}

/** The installation's hourly budget, as GitHub's `x-ratelimit-*` headers show it; a new window once the reset passed. */
function budgetOf(state: State, installationId: number): Budget {
  let budget = state.budgets.get(installationId);
  if (!budget || budget.resetAt <= state.now()) {
    budget = { used: 0, resetAt: state.now() + 3600_000, secondary: budget?.secondary ?? [] };
    state.budgets.set(installationId, budget);
  }
  return budget;
}

function rateHeaders(budget: Budget): Record<string, string> {
  return {
    'x-ratelimit-limit': String(HOURLY_BUDGET),
    'x-ratelimit-remaining': String(Math.max(0, HOURLY_BUDGET - budget.used)),
    'x-ratelimit-reset': String(Math.ceil(budget.resetAt / 1000)),
    'x-ratelimit-used': String(budget.used),
    'x-ratelimit-resource': 'core',
  };
}

const SECONDARY_MESSAGE = 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.';

/** A rate limit answered instead of the call, if the installation is limited: a scripted secondary one, or its spent budget. */
function rateLimited(state: State, installationId: number): Answer | undefined {
  const budget = budgetOf(state, installationId);
  const secondary = budget.secondary.find((s) => s.times > 0);
  if (secondary) {
    secondary.times -= 1;
    const retryAfter: Record<string, string> =
      secondary.retryAfterSeconds === undefined ? {} : { 'retry-after': String(secondary.retryAfterSeconds) };
    return {
      status: secondary.status,
      body: { message: SECONDARY_MESSAGE, documentation_url: 'https://docs.github.com/rest' },
      headers: { ...rateHeaders(budget), ...retryAfter },
    };
  }
  if (budget.used >= HOURLY_BUDGET) {
    const message = `API rate limit exceeded for installation ID ${installationId}.`;
    return { status: 403, body: { message, documentation_url: 'https://docs.github.com/rest' }, headers: rateHeaders(budget) };
  }
  budget.used += 1;
  return undefined;
}

/**
 * The App's own calls (its JWT) limited like the rest: a scripted secondary limit, its hourly
 * budget, and GitHub's 900 points a minute (a GET 1, a POST 5), answered 403 with `retry-after`
 * once the last minute's calls would pass them.
 */
function appRateLimited(state: State, method: string): Answer | undefined {
  const limited = rateLimited(state, APP_BUDGET);
  if (limited) return limited;
  const now = state.now();
  state.appPoints = state.appPoints.filter((p) => p.at > now - 60_000);
  const points = method === 'GET' ? 1 : 5;
  if (state.appPoints.reduce((sum, p) => sum + p.points, 0) + points > POINTS_PER_MINUTE) {
    const retryAfter = Math.ceil((state.appPoints[0]!.at + 60_000 - now) / 1000);
    return {
      status: 403,
      body: { message: SECONDARY_MESSAGE, documentation_url: 'https://docs.github.com/rest' },
      headers: { ...rateHeaders(budgetOf(state, APP_BUDGET)), 'retry-after': String(Math.max(1, retryAfter)) },
    };
  }
  state.appPoints.push({ at: now, points });
  return undefined;
}

// ---------------------------------------------------------------------------------------
// The App: installation tokens and the webhook delivery log.

/** Whether GitHub knows the installation: one with an account, one a test named, or one holding a repository. */
function installationExists(state: State, installationId: number): boolean {
  if (state.deleted.has(installationId)) return false;
  if (state.installations.has(installationId) || state.installed.has(installationId)) return true;
  return [...state.repos.values()].some((repo) => repo.installationId === installationId);
}

const TOKEN_DOCS = 'https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app';

function issueToken(state: State, path: string): Answer {
  const installationId = Number(path.split('/')[3]);
  if (!installationExists(state, installationId)) return { status: 404, body: { message: 'Not Found', documentation_url: TOKEN_DOCS } };
  if (state.suspended.has(installationId)) {
    return { status: 403, body: { message: 'This installation has been suspended', documentation_url: TOKEN_DOCS } };
  }
  const token = `ghs_${randomBytes(18).toString('base64url')}`;
  const expiresAt = state.now() + state.tokenLifetimeMs;
  state.tokens.set(token, { installationId, expiresAt, revoked: false });
  state.fake.issuedTokens.push(token);
  return {
    status: 201,
    body: { token, expires_at: new Date(expiresAt).toISOString(), permissions: { contents: 'read' }, repository_selection: 'all' },
  };
}

/** The log as GitHub lists it, newest first; a cursor names where the next page starts (opaque to the client). */
function answerDeliveries(state: State, url: URL): Answer {
  const perPage = Math.min(100, Math.max(1, Number(url.searchParams.get('per_page') ?? 30) || 30));
  const cursor = url.searchParams.get('cursor');
  const before = cursor === null ? Infinity : Number(/^v1_(\d+)$/.exec(cursor)?.[1] ?? NaN);
  if (Number.isNaN(before)) return { status: 422, body: { message: 'Invalid cursor', documentation_url: 'https://docs.github.com/rest' } };
  const sorted = state.fake.deliveries.filter((d) => d.id < before).sort((a, b) => b.id - a.id);
  const page = sorted.slice(0, perPage);
  const headers: Record<string, string> = {};
  if (sorted.length > perPage)
    headers.link = `<${url.origin}/app/hook/deliveries?per_page=${perPage}&cursor=v1_${page.at(-1)!.id}>; rel="next"`;
  return { status: 200, body: page.map(({ response: _response, ...item }) => item), headers };
}

function answerDelivery(state: State, path: string): Answer {
  const delivery = state.fake.deliveries.find((d) => d.id === Number(path.split('/')[4]));
  if (!delivery) return notFound;
  const request = state.logged.get(delivery.id);
  const { response, ...item } = delivery;
  return {
    status: 200,
    body: {
      ...item,
      request: {
        headers: { 'X-GitHub-Event': delivery.event, 'X-GitHub-Delivery': delivery.guid },
        payload: request ? JSON.parse(request.raw || '{}') : null,
      },
      response: { headers: { 'Content-Type': 'application/json' }, payload: response.body },
    },
  };
}

function answerRedeliver(state: State, path: string): Answer {
  const id = Number(path.split('/')[4]);
  const request = state.logged.get(id);
  const delivery = state.fake.deliveries.find((d) => d.id === id);
  if (!request || !delivery) return notFound;
  if (state.spammed > 0) {
    state.spammed -= 1;
    return {
      status: 422,
      body: {
        message: 'Validation failed, or the endpoint has been spammed.',
        documentation_url: 'https://docs.github.com/rest/apps/webhooks',
      },
    };
  }
  if (Date.parse(delivery.delivered_at) < state.now() - REDELIVERY_WINDOW_MS) {
    return {
      status: 422,
      body: { message: 'This delivery is too old to be redelivered.', documentation_url: 'https://docs.github.com/rest' },
    };
  }
  state.fake.redeliveryRequests.push(id);
  // GitHub accepts at once and sends the delivery again afterwards, as a new attempt in its log.
  const failing = state.alwaysFailing.get(request.guid);
  if (failing) logAttempt(state, request, failing, true);
  else void state.fake.redeliverTo?.(request).then((answer) => logAttempt(state, request, answer, true));
  return { status: 202, body: {} };
}

function answerApp(state: State, route: ReturnType<typeof classify>, path: string, url: URL): Answer {
  if (route.kind === 'token') return issueToken(state, path);
  if (route.kind === 'redeliver') return answerRedeliver(state, path);
  if (route.kind === 'delivery') return answerDelivery(state, path);
  return answerDeliveries(state, url);
}

function logAttempt(
  state: State,
  request: LoggedRequest,
  answer: number | DeliveryAnswer,
  redelivery: boolean,
  deliveredAt?: number,
): number {
  const { status, body } = typeof answer === 'number' ? { status: answer, body: null } : answer;
  const id = Math.max(0, ...state.fake.deliveries.map((d) => d.id)) + 1;
  state.logged.set(id, request);
  const delivered = status >= 200 && status < 300;
  state.fake.deliveries.push({
    id,
    guid: request.guid,
    delivered_at: new Date(deliveredAt ?? state.now()).toISOString(),
    redelivery,
    status: delivered ? 'OK' : status === 0 ? 'timed out' : `Invalid HTTP Response: ${status}`,
    status_code: status,
    event: request.event,
    action: null,
    duration: 0.05,
    response: { body: body ?? null },
  });
  return id;
}
// ---------------------------------------------------------------------------------------
// The install flow: GitHub's install page, the OAuth code exchange, the installer's installations.

const USER_TOKEN_SECONDS = 8 * 3600;
const CODE_MS = 10 * 60_000;

/** The signed-in user of the browser, by the fake's session cookie. */
function sessionUser(state: State, req: http.IncomingMessage): string | undefined {
  const login = /(?:^|;\s*)fake_github_user=([^;]+)/.exec(req.headers.cookie ?? '')?.[1];
  return login !== undefined && state.users.has(login) ? login : undefined;
}

/**
 * GitHub's install page, clicked through: the signed-in user installs the App on their account,
 * authorizes it (OAuth during installation), and is sent to the App's Callback URL with a code,
 * the new installation's id, `setup_action=install` and the state the link carried, unchanged.
 */
function answerInstallPage(state: State, req: http.IncomingMessage, path: string, url: URL): Answer {
  if (path.split('/')[2] !== state.fake.slug) return { status: 404, text: 'Not Found' };
  const login = sessionUser(state, req);
  if (login === undefined)
    return { status: 302, headers: { location: `${url.origin}/login?return_to=${encodeURIComponent(url.pathname + url.search)}` } };
  if (state.fake.callbackUrl === undefined) return { status: 200, text: 'Installed. The App has no Callback URL.' };
  const installationId = state.fake.addInstallation(login, [login]);
  const callback = new URL(state.fake.callbackUrl);
  callback.searchParams.set('code', state.fake.issueCode(login));
  callback.searchParams.set('installation_id', String(installationId));
  callback.searchParams.set('setup_action', 'install');
  const given = url.searchParams.get('state');
  if (given !== null) callback.searchParams.set('state', given);
  return { status: 302, headers: { location: callback.toString() } };
}

/** The exchange's parameters: a JSON or form body, or the query string, as GitHub takes them. */
function oauthParams(req: http.IncomingMessage, body: Buffer, url: URL): Record<string, string | undefined> {
  const type = req.headers['content-type'] ?? '';
  if (type.includes('json')) {
    try {
      return JSON.parse(body.toString('utf8')) as Record<string, string>;
    } catch {
      return {};
    }
  }
  const form = new URLSearchParams(body.length > 0 ? body.toString('utf8') : url.search);
  return Object.fromEntries(form);
}

/** GitHub answers the exchange 200 in the format the Accept header asks for, errors included. */
function oauthAnswer(req: http.IncomingMessage, fields: Record<string, string | number>): Answer {
  if ((req.headers.accept ?? '').includes('json')) return { status: 200, body: fields };
  const text = new URLSearchParams(Object.entries(fields).map(([k, v]): [string, string] => [k, String(v)])).toString();
  return { status: 200, text, headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' } };
}

const OAUTH_ERRORS: Record<string, string> = {
  incorrect_client_credentials: 'The client_id and/or client_secret passed are incorrect.',
  redirect_uri_mismatch: 'The redirect_uri MUST match the registered callback URL for this application.',
  bad_verification_code: 'The code passed is incorrect or expired.',
};

function answerOAuthToken(state: State, req: http.IncomingMessage, body: Buffer, url: URL): Answer {
  const params = oauthParams(req, body, url);
  const refuse = (error: string) =>
    oauthAnswer(req, {
      error,
      error_description: OAUTH_ERRORS[error]!,
      error_uri: `https://docs.github.com/apps/troubleshooting#${error}`,
    });
  if (params.client_id !== state.fake.clientId || params.client_secret !== state.fake.clientSecret)
    return refuse('incorrect_client_credentials');
  if (params.redirect_uri !== undefined && params.redirect_uri !== state.fake.callbackUrl) return refuse('redirect_uri_mismatch');
  const code = params.code === undefined ? undefined : state.codes.get(params.code);
  if (!code || code.used || code.expiresAt < state.now()) return refuse('bad_verification_code');
  code.used = true;
  const token = `ghu_${randomBytes(27).toString('base64url')}`;
  const refreshToken = `ghr_${randomBytes(57).toString('base64url')}`;
  state.userTokens.set(token, code.login);
  state.fake.issuedTokens.push(token, refreshToken);
  return oauthAnswer(req, {
    access_token: token,
    expires_in: USER_TOKEN_SECONDS,
    refresh_token: refreshToken,
    refresh_token_expires_in: 184 * 24 * 3600,
    token_type: 'bearer',
    scope: '',
  });
}

/** The App's installations the user can reach, paged like GitHub (`per_page` up to 100, a Link header). */
function answerUserInstallations(state: State, login: string, url: URL): Answer {
  const perPage = Math.min(100, Math.max(1, Number(url.searchParams.get('per_page') ?? 30) || 30));
  const page = Math.max(1, Number(url.searchParams.get('page') ?? 1) || 1);
  const visible = [...state.installations.values()].filter((i) => i.users.has(login)).sort((a, b) => a.id - b.id);
  const lastPage = Math.max(1, Math.ceil(visible.length / perPage));
  const links = [];
  if (page < lastPage) links.push(`<${url.origin}/user/installations?per_page=${perPage}&page=${page + 1}>; rel="next"`);
  links.push(`<${url.origin}/user/installations?per_page=${perPage}&page=${lastPage}>; rel="last"`);
  const installations = visible.slice((page - 1) * perPage, page * perPage).map((i) => ({
    id: i.id,
    account: { login: i.account, id: state.users.get(i.account) ?? 0, type: 'User' },
    app_id: Number(state.appId),
    app_slug: state.fake.slug,
    target_type: 'User',
    repository_selection: 'all',
    permissions: { contents: 'read', metadata: 'read' },
  }));
  return { status: 200, body: { total_count: visible.length, installations }, headers: { link: links.join(', ') } };
}

// ---------------------------------------------------------------------------------------

const APP_ROUTES = new Set<FakeGithubCall['kind']>(['token', 'deliveries', 'delivery', 'redeliver']);
const REPO_ROUTES = new Set<FakeGithubCall['kind']>(['repo', 'ref', 'tree', 'blob', 'compare']);

/** GitHub's refusal of the call's credentials, if it refuses them: each route takes one kind of credential. */
function refusedCredentials(kind: FakeGithubCall['kind'], auth: ReturnType<typeof authOf>): Answer | undefined {
  if (APP_ROUTES.has(kind) && auth.jwtError)
    return { status: 401, body: { message: auth.jwtError, documentation_url: 'https://docs.github.com/rest' } };
  if (APP_ROUTES.has(kind)) return auth.kind === 'jwt' ? undefined : badCredentials;
  if (REPO_ROUTES.has(kind)) return auth.kind === 'token' ? undefined : badCredentials;
  if (kind !== 'user_installations' || auth.kind === 'user') return undefined;
  if (auth.kind === 'none' || auth.kind === 'invalid') return badCredentials;
  const message = 'You must authenticate with an access token authorized to a GitHub App in order to list installations';
  return { status: 403, body: { message } };
}

function answerCall(
  state: State,
  request: { req: http.IncomingMessage; body: Buffer; path: string; url: URL },
  route: ReturnType<typeof classify>,
  auth: ReturnType<typeof authOf>,
  call: FakeGithubCall,
): Answer {
  const { req, body, path, url } = request;
  const method = req.method ?? 'GET';
  if (route.kind === 'other') return notFound;
  const refused = refusedCredentials(route.kind, auth);
  if (refused) return refused;
  if (APP_ROUTES.has(route.kind)) {
    const limited = appRateLimited(state, method);
    if (limited) return limited;
  }
  const scripted = state.failures.find((f) => f.times > 0 && f.match(call));
  if (scripted) {
    scripted.times -= 1;
    return { status: scripted.status, body: { message: scripted.message ?? `scripted ${scripted.status}` }, headers: scripted.headers };
  }
  if (APP_ROUTES.has(route.kind)) {
    const answer = answerApp(state, route, path, url);
    return { ...answer, headers: { ...rateHeaders(budgetOf(state, APP_BUDGET)), ...answer.headers } };
  }
  if (route.kind === 'install_page') return answerInstallPage(state, req, path, url);
  if (route.kind === 'oauth_token') return answerOAuthToken(state, req, body, url);
  if (route.kind === 'user_installations') return answerUserInstallations(state, auth.login!, url);
  const limited = rateLimited(state, auth.installationId!);
  if (limited) return limited;
  const answer = answerRepo(state, route, auth.installationId, url);
  return { ...answer, headers: { ...rateHeaders(budgetOf(state, auth.installationId!)), ...answer.headers } };
}

async function handle(state: State, req: http.IncomingMessage, body: Buffer, res: http.ServerResponse, latencyMs: number): Promise<void> {
  const url = new URL(req.url ?? '/', `http://${req.headers.host ?? '127.0.0.1'}`);
  // Clients percent-encode a ref's slashes (`heads%2Fmain`); GitHub decodes them.
  const path = decodeURIComponent(url.pathname).replace(/^\/api\/v3/, '');
  const method = req.method ?? 'GET';
  const route = classify(method, path);
  const auth = authOf(state, req.headers.authorization);
  const call: FakeGithubCall = {
    method,
    path,
    repository: route.repository,
    installationId: auth.installationId,
    kind: route.kind,
    status: 0,
    auth: auth.kind,
    at: state.now(),
  };
  state.fake.calls.push(call);
  const key = route.repository;
  if (key) {
    state.inFlight.set(key, (state.inFlight.get(key) ?? 0) + 1);
    state.maxInFlight = Math.max(state.maxInFlight, state.inFlight.get(key)!);
  }
  try {
    await new Promise((resolve) => setTimeout(resolve, latencyMs));
    const answer = answerCall(state, { req, body, path, url }, route, auth, call);
    call.status = answer.status;
    reply(res, answer, state.now());
  } finally {
    if (key) state.inFlight.set(key, state.inFlight.get(key)! - 1);
  }
}

function repoOf(state: State, repository: string): Repo {
  const repo = state.repos.get(repository.toLowerCase());
  if (!repo) throw new Error(`the fake holds no repository ${repository}`);
  return repo;
}

function newRepo(state: State, repository: string, installationId: number, defaultBranch: string): Repo {
  const key = repository.toLowerCase();
  const repo = state.repos.get(key) ?? {
    id: randomInt(1_000_000, 2 ** 40),
    fullName: repository,
    installationId,
    branches: new Map(),
    defaultBranch,
    treeEntries: TREE_LIMITS.entries,
    lags: new Map(),
  };
  state.repos.set(key, repo);
  return repo;
}

/** The test's handles on repositories: commits, branches and how their reads behave. */
function gitControls(
  state: State,
): Pick<
  FakeGithub,
  | 'commit'
  | 'createEmptyRepository'
  | 'setHead'
  | 'deleteBranch'
  | 'renameBranch'
  | 'lagRefReads'
  | 'truncate'
  | 'repositoryId'
  | 'defaultBranch'
> {
  return {
    repositoryId: (repository) => repoOf(state, repository).id,
    defaultBranch: (repository) => repoOf(state, repository).defaultBranch,
    commit(repository, installationId, branch, files, parent) {
      const repo = newRepo(state, repository, installationId, branch);
      const sha = state.git.commit(files, parent === undefined ? (repo.branches.get(branch) ?? null) : parent);
      repo.branches.set(branch, sha);
      return sha;
    },
    createEmptyRepository(repository, installationId, defaultBranch = 'main') {
      newRepo(state, repository, installationId, defaultBranch);
    },
    setHead(repository, branch, sha) {
      if (!state.git.hasCommit(sha)) throw new Error(`no commit ${sha}`);
      repoOf(state, repository).branches.set(branch, sha);
    },
    deleteBranch(repository, branch) {
      repoOf(state, repository).branches.delete(branch);
    },
    renameBranch(repository, from, to) {
      const repo = repoOf(state, repository);
      repo.branches.set(to, repo.branches.get(from)!);
      repo.branches.delete(from);
      if (repo.defaultBranch === from) repo.defaultBranch = to;
    },
    lagRefReads(repository, branch, shas) {
      repoOf(state, repository).lags.set(branch, [...shas]);
    },
    truncate(repository, entries = 1) {
      repoOf(state, repository).treeEntries = entries;
    },
  };
}

/** The test's handles on rate limits and tokens. */
/** The test's handles on installations: known, suspended, deleted. */
function installationControls(
  state: State,
): Pick<FakeGithub, 'install' | 'suspendInstallation' | 'unsuspendInstallation' | 'deleteInstallation' | 'revokeTokens'> {
  const revoke = (installationId: number) => {
    for (const token of state.tokens.values()) if (token.installationId === installationId) token.revoked = true;
  };
  return {
    install: (installationId) => void state.installed.add(installationId),
    suspendInstallation(installationId) {
      state.suspended.add(installationId);
      revoke(installationId);
    },
    unsuspendInstallation: (installationId) => void state.suspended.delete(installationId),
    deleteInstallation(installationId) {
      state.deleted.add(installationId);
      revoke(installationId);
    },
    revokeTokens: revoke,
  };
}

function limitControls(state: State): Pick<FakeGithub, 'exhaustRateLimit' | 'secondaryRateLimit' | 'spamRedeliveries'> {
  return {
    spamRedeliveries: (times) => void (state.spammed += times),
    exhaustRateLimit(installationId, resetInMs) {
      const budget = budgetOf(state, installationId === 'app' ? APP_BUDGET : installationId);
      budget.used = HOURLY_BUDGET;
      budget.resetAt = state.now() + resetInMs;
    },
    secondaryRateLimit(installationId, options = {}) {
      budgetOf(state, installationId === 'app' ? APP_BUDGET : installationId).secondary.push({
        times: options.times ?? 1,
        status: options.status ?? 403,
        retryAfterSeconds: options.retryAfterSeconds,
      });
    },
  };
}

export async function startFakeGithub(
  options: { latencyMs?: number; now?: () => number; tokenLifetimeMs?: number } = {},
): Promise<FakeGithub> {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const state = {
    appId: String(100_000 + Math.floor(Math.random() * 800_000)),
    publicKey,
    now: options.now ?? Date.now,
    tokens: new Map(),
    tokenLifetimeMs: options.tokenLifetimeMs ?? 3600_000,
    userTokens: new Map(),
    codes: new Map(),
    users: new Map(),
    installations: new Map(),
    installed: new Set(),
    suspended: new Set(),
    deleted: new Set(),
    budgets: new Map(),
    appPoints: [],
    spammed: 0,
    repos: new Map(),
    git: new GitStore(),
    failures: [],
    inFlight: new Map(),
    maxInFlight: 0,
    logged: new Map(),
    alwaysFailing: new Map(),
  } as unknown as State;
  const firstInstallationId = randomInt(1_000_000_000, 2 ** 46);
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => void handle(state, req, Buffer.concat(chunks), res, options.latencyMs ?? 15));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const fake: FakeGithub = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    appId: state.appId,
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    slug: `den-test-${state.appId}`,
    clientId: `Iv23li${randomBytes(7).toString('hex')}`,
    clientSecret: randomBytes(20).toString('hex'),
    calls: [],
    issuedTokens: [],
    now: () => state.now(),
    addUser(login) {
      if (!state.users.has(login)) state.users.set(login, randomInt(1_000_000, 2 ** 40));
    },
    addInstallation(account, users) {
      // Increasing, as GitHub's ids are: listings sorted by id end with the newest.
      const id = Math.max(firstInstallationId, ...state.installations.keys()) + 1;
      state.installations.set(id, { id, account, users: new Set(users) });
      return id;
    },
    issueCode(login) {
      const code = randomBytes(10).toString('hex');
      state.codes.set(code, { login, expiresAt: state.now() + CODE_MS, used: false });
      return code;
    },
    deliveries: [],
    redeliveryRequests: [],
    logDelivery: (request, answer, logOptions = {}) => logAttempt(state, request, answer, false, logOptions.deliveredAt),
    alwaysFail: (guid, answer) => void state.alwaysFailing.set(guid, answer),
    maxConcurrentPerRepository: () => state.maxInFlight,
    ...gitControls(state),
    ...limitControls(state),
    ...installationControls(state),
    fail(match, status, times = 1, headers, message) {
      state.failures.push({ match, status, times, headers, message });
    },
    clearFailures: () => void state.failures.splice(0),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  state.fake = fake;
  return fake;
}
