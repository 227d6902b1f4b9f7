/**
 * A fake GitHub on 127.0.0.1 for the target sync, the reconcile (the App's delivery log, and
 * redeliveries that really send the logged delivery again) and the App's install flow. It serves
 * both hosts on one origin, as GitHub Enterprise Server does: the REST API (also under `/api/v3`)
 * and the web pages the flow uses (the App's install page, the OAuth code exchange).
 *
 * It speaks the real wire format and checks credentials the way GitHub does: the App JWT (RS256)
 * is verified with the App's public key on the App routes, the installation token on every
 * repository call, the user token on `GET /user/installations`, and the client id, client secret,
 * code (single use, ten minutes, of this client) and redirect URI on the code exchange, which
 * answers GitHub's own OAuth errors. It records every call and every token it issued, can answer
 * scripted failures, and counts overlapping requests for one repository (two syncs of one target
 * at once would overlap, since every answer is delayed).
 */
import { createHash, generateKeyPairSync, randomBytes, randomInt, verify, type KeyObject } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeGithubCall {
  method: string;
  path: string;
  /** `owner/name` for repository routes. */
  repository?: string;
  kind:
    | 'token'
    | 'repo'
    | 'ref'
    | 'tree'
    | 'blob'
    | 'deliveries'
    | 'redeliver'
    | 'install_page'
    | 'oauth_token'
    | 'user_installations'
    | 'other';
  status: number;
  /** Which credential the Authorization header carried (an App JWT, an installation or user token), never the secret itself. */
  auth: 'jwt' | 'token' | 'user' | 'none' | 'invalid';
  at: number;
}

interface ScriptedFailure {
  match: (call: Pick<FakeGithubCall, 'kind' | 'repository' | 'path'>) => boolean;
  status: number;
  headers?: Record<string, string>;
  times: number;
}

interface Commit {
  files: Map<string, string>;
}

interface Repo {
  id: number;
  /** As first committed: GitHub keeps a repository's case, and matches names without it. */
  fullName: string;
  installationId: number;
  branches: Map<string, string>;
  truncated: boolean;
}

/** A webhook delivery as GitHub's App delivery log lists it. */
export interface FakeDelivery {
  id: number;
  guid: string;
  delivered_at: string;
  redelivery: boolean;
  status: string;
  status_code: number;
  event: string;
  action: string | null;
}

/** A webhook request as it was sent, kept so a redelivery sends the same GUID, body and signature. */
export interface LoggedRequest {
  event: string;
  guid: string;
  raw: string;
  signature: string;
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
  /** The most concurrent requests any one repository saw. */
  maxConcurrentPerRepository(): number;
  /** Commits `files` as the new head of `branch` (the whole tree); returns the commit SHA. */
  commit(repository: string, installationId: number, branch: string, files: Record<string, string>): string;
  setHead(repository: string, branch: string, sha: string): void;
  /** The tree API answers `truncated: true` for this repository's recursive reads. */
  truncate(repository: string): void;
  /** The next `times` calls that `match` accepts get `status`. */
  fail(match: ScriptedFailure['match'], status: number, times?: number, headers?: Record<string, string>): void;
  deliveries: FakeDelivery[];
  /** Ids passed to POST /app/hook/deliveries/{id}/attempts, in order. */
  redeliveryRequests: number[];
  /** Logs a delivery the test sent, with the status the service answered; returns its delivery id. */
  logDelivery(request: LoggedRequest, statusCode: number): number;
  /** Where redeliveries go: sends the logged request again and resolves to the service's status. */
  redeliverTo?: (request: LoggedRequest) => Promise<number>;
  close(): Promise<void>;
}

/** Git's blob id: sha1 of `blob <size>\0<content>`. */
export function gitBlobSha(content: string): string {
  const body = Buffer.from(content, 'utf8');
  return createHash('sha1').update(`blob ${body.length}\0`).update(body).digest('hex');
}

const hex40 = () => randomBytes(20).toString('hex');

function verifyJwt(token: string, publicKey: KeyObject, appId: string, nowS: number): boolean {
  const [header, payload, signature] = token.split('.');
  if (!header || !payload || !signature) return false;
  const ok = verify('RSA-SHA256', Buffer.from(`${header}.${payload}`), publicKey, Buffer.from(signature, 'base64url'));
  if (!ok) return false;
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { iss?: unknown; exp?: number; iat?: number };
  const alg = (JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as { alg?: string }).alg;
  return alg === 'RS256' && String(claims.iss) === appId && (claims.exp ?? 0) > nowS && (claims.iat ?? Infinity) <= nowS + 60;
}

interface Installation {
  id: number;
  account: string;
  users: Set<string>;
}

interface State {
  appId: string;
  publicKey: KeyObject;
  tokens: Map<string, number>;
  /** User access tokens, to their user's login. */
  userTokens: Map<string, string>;
  codes: Map<string, { login: string; expiresAt: number; used: boolean }>;
  users: Map<string, number>;
  installations: Map<number, Installation>;
  repos: Map<string, Repo>;
  commits: Map<string, Commit>;
  trees: Map<string, { commit: string; dir: string }>;
  failures: ScriptedFailure[];
  inFlight: Map<string, number>;
  maxInFlight: number;
  /** The request behind each logged delivery id. */
  logged: Map<number, LoggedRequest>;
  fake: FakeGithub;
}

/** A JSON body, or `text` (an HTML page, a form-encoded OAuth answer). */
type Answer = { status: number; body?: unknown; text?: string; headers?: Record<string, string> };

function reply(res: http.ServerResponse, answer: Answer): void {
  if (answer.text !== undefined) {
    res.writeHead(answer.status, { 'content-type': 'text/html; charset=utf-8', ...answer.headers });
    res.end(answer.text);
    return;
  }
  res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
  res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
}

const notFound: Answer = { status: 404, body: { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' } };

/** Who is calling: the App (a JWT that verifies), an installation or a user (a token it issued), or nobody. */
function authOf(
  state: State,
  authorization: string | undefined,
): { kind: FakeGithubCall['auth']; installationId?: number; login?: string } {
  if (!authorization) return { kind: 'none' };
  const [scheme, credential] = authorization.split(' ');
  if (scheme?.toLowerCase() === 'bearer' && credential && credential.split('.').length === 3) {
    return verifyJwt(credential, state.publicKey, state.appId, Math.floor(Date.now() / 1000)) ? { kind: 'jwt' } : { kind: 'invalid' };
  }
  if (credential === undefined) return { kind: 'invalid' };
  const login = state.userTokens.get(credential);
  if (login !== undefined) return { kind: 'user', login };
  const installationId = state.tokens.get(credential);
  return installationId === undefined ? { kind: 'invalid' } : { kind: 'token', installationId };
}

function filesUnder(commit: Commit, dir: string): [string, string][] {
  const prefix = dir === '' ? '' : `${dir}/`;
  return [...commit.files].filter(([path]) => path.startsWith(prefix));
}

function treeSha(state: State, commitSha: string, dir: string): string {
  const sha = createHash('sha1').update(`${commitSha}:${dir}`).digest('hex');
  state.trees.set(sha, { commit: commitSha, dir });
  return sha;
}

/** The entries of one directory (or of everything below it when recursive), as GitHub lists them. */
function treeEntries(state: State, commitSha: string, dir: string, recursive: boolean) {
  const commit = state.commits.get(commitSha)!;
  const prefix = dir === '' ? '' : `${dir}/`;
  const dirs = new Set<string>();
  const blobs: { path: string; mode: string; type: string; sha: string; size: number }[] = [];
  for (const [path, content] of filesUnder(commit, dir)) {
    const rest = path.slice(prefix.length);
    const parts = rest.split('/');
    for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join('/'));
    if (recursive || parts.length === 1)
      blobs.push({ path: rest, mode: '100644', type: 'blob', sha: gitBlobSha(content), size: Buffer.byteLength(content) });
  }
  const trees = [...dirs]
    .filter((d) => recursive || !d.includes('/'))
    .map((d) => ({ path: d, mode: '040000', type: 'tree', sha: treeSha(state, commitSha, prefix + d) }));
  return [...trees, ...blobs];
}

function answerTree(state: State, sha: string, recursive: boolean, repo: Repo): Answer {
  const known = state.trees.get(sha);
  const commitSha = known?.commit ?? (state.commits.has(sha) ? sha : undefined);
  if (commitSha === undefined) return notFound;
  const dir = known?.dir ?? '';
  const all = treeEntries(state, commitSha, dir, recursive);
  if (recursive && repo.truncated) {
    // GitHub cuts a recursive listing short; the top level is always there.
    return { status: 200, body: { sha, truncated: true, tree: all.filter((e) => !e.path.includes('/')).slice(0, 1) } };
  }
  return { status: 200, body: { sha, truncated: false, tree: all } };
}

function answerBlob(state: State, sha: string): Answer {
  for (const commit of state.commits.values()) {
    for (const content of commit.files.values()) {
      if (gitBlobSha(content) === sha) {
        const size = Buffer.byteLength(content);
        return { status: 200, body: { sha, size, encoding: 'base64', content: Buffer.from(content).toString('base64') } };
      }
    }
  }
  return notFound;
}

const REPO_ROUTE =
  /^\/repos\/([^/]+\/[^/]+?)(?:\/(git\/ref\/heads\/(.+)|commits\/(.+)|git\/trees\/([0-9a-f]{40})|git\/blobs\/([0-9a-f]{40})))?$/;

function classify(method: string, path: string): { kind: FakeGithubCall['kind']; repository?: string; match?: RegExpExecArray } {
  if (method === 'POST' && /^\/app\/installations\/\d+\/access_tokens$/.test(path)) return { kind: 'token' };
  if (method === 'GET' && path === '/app/hook/deliveries') return { kind: 'deliveries' };
  if (method === 'POST' && /^\/app\/hook\/deliveries\/\d+\/attempts$/.test(path)) return { kind: 'redeliver' };
  if (method === 'GET' && /^\/apps\/[^/]+\/installations\/new$/.test(path)) return { kind: 'install_page' };
  if (method === 'POST' && path === '/login/oauth/access_token') return { kind: 'oauth_token' };
  if (method === 'GET' && path === '/user/installations') return { kind: 'user_installations' };
  const match = method === 'GET' ? REPO_ROUTE.exec(path) : null;
  if (!match) return { kind: 'other' };
  const kind =
    match[2] === undefined ? 'repo' : match[3] !== undefined || match[4] !== undefined ? 'ref' : match[5] !== undefined ? 'tree' : 'blob';
  return { kind, repository: match[1]!.toLowerCase(), match };
}

function answerRepo(state: State, route: ReturnType<typeof classify>, installationId: number | undefined, url: URL): Answer {
  const repo = state.repos.get(route.repository!);
  if (!repo || repo.installationId !== installationId) return notFound;
  const m = route.match!;
  if (route.kind === 'repo') {
    const [owner, name] = repo.fullName.split('/') as [string, string];
    const body = { id: repo.id, name, full_name: repo.fullName, private: true, owner: { login: owner }, default_branch: 'master' };
    return { status: 200, body };
  }
  if (route.kind === 'ref') {
    const branch = decodeURIComponent(m[3] ?? m[4]!).replace(/^refs\/heads\//, '');
    const sha = repo.branches.get(branch);
    if (sha === undefined) return notFound;
    return m[3] !== undefined
      ? { status: 200, body: { ref: `refs/heads/${branch}`, object: { sha, type: 'commit' } } }
      : { status: 200, body: { sha, commit: { tree: { sha: treeSha(state, sha, '') } } } };
  }
  if (route.kind === 'tree') return answerTree(state, m[5]!, url.searchParams.get('recursive') === '1', repo);
  return answerBlob(state, m[6]!);
}

function answerApp(state: State, route: ReturnType<typeof classify>, path: string, url: URL): Answer {
  if (route.kind === 'token') {
    const token = `ghs_${randomBytes(18).toString('base64url')}`;
    state.tokens.set(token, Number(path.split('/')[3]));
    state.fake.issuedTokens.push(token);
    return { status: 201, body: { token, expires_at: new Date(Date.now() + 3600_000).toISOString(), permissions: { contents: 'read' } } };
  }
  if (route.kind === 'redeliver') {
    const id = Number(path.split('/')[4]);
    const request = state.logged.get(id);
    if (!request) return notFound;
    state.fake.redeliveryRequests.push(id);
    // GitHub accepts at once and sends the delivery again afterwards, as a new attempt in its log.
    void state.fake.redeliverTo?.(request).then((status) => logAttempt(state, request, status, true));
    return { status: 202, body: {} };
  }
  const perPage = Number(url.searchParams.get('per_page') ?? 30);
  const start = Number(url.searchParams.get('cursor') ?? 0);
  const sorted = [...state.fake.deliveries].sort((a, b) => b.id - a.id);
  const page = sorted.slice(start, start + perPage);
  const next =
    start + perPage < sorted.length
      ? `<${url.origin}/app/hook/deliveries?per_page=${perPage}&cursor=${start + perPage}>; rel="next"`
      : undefined;
  return { status: 200, body: page, headers: next ? { link: next } : {} };
}

function logAttempt(state: State, request: LoggedRequest, statusCode: number, redelivery: boolean): number {
  const id = Math.max(0, ...state.fake.deliveries.map((d) => d.id)) + 1;
  state.logged.set(id, request);
  state.fake.deliveries.push({
    id,
    guid: request.guid,
    delivered_at: new Date().toISOString(),
    redelivery,
    status: statusCode >= 200 && statusCode < 300 ? 'OK' : 'failed',
    status_code: statusCode,
    event: request.event,
    action: null,
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
  if (!code || code.used || code.expiresAt < Date.now()) return refuse('bad_verification_code');
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

const APP_ROUTES = new Set<FakeGithubCall['kind']>(['token', 'deliveries', 'redeliver']);
const REPO_ROUTES = new Set<FakeGithubCall['kind']>(['repo', 'ref', 'tree', 'blob']);

/** GitHub's refusal of the call's credentials, if it refuses them: each route takes one kind of credential. */
function refusedCredentials(kind: FakeGithubCall['kind'], auth: ReturnType<typeof authOf>): Answer | undefined {
  const badCredentials = { status: 401, body: { message: 'Bad credentials' } };
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
  if (route.kind === 'other') return notFound;
  const refused = refusedCredentials(route.kind, auth);
  if (refused) return refused;
  const scripted = state.failures.find((f) => f.times > 0 && f.match(call));
  if (scripted) {
    scripted.times -= 1;
    return { status: scripted.status, body: { message: `scripted ${scripted.status}` }, headers: scripted.headers };
  }
  if (APP_ROUTES.has(route.kind)) return answerApp(state, route, path, url);
  if (route.kind === 'install_page') return answerInstallPage(state, req, path, url);
  if (route.kind === 'oauth_token') return answerOAuthToken(state, req, body, url);
  if (route.kind === 'user_installations') return answerUserInstallations(state, auth.login!, url);
  return answerRepo(state, route, auth.installationId, url);
}

async function handle(state: State, req: http.IncomingMessage, body: Buffer, res: http.ServerResponse, latencyMs: number): Promise<void> {
  const url = new URL(req.url ?? '/', `http://${req.headers.host ?? '127.0.0.1'}`);
  // Clients percent-encode a ref's slashes (`heads%2Fmain`); GitHub decodes them.
  const path = decodeURIComponent(url.pathname).replace(/^\/api\/v3/, '');
  const method = req.method ?? 'GET';
  const route = classify(method, path);
  const auth = authOf(state, req.headers.authorization);
  const call: FakeGithubCall = { method, path, repository: route.repository, kind: route.kind, status: 0, auth: auth.kind, at: Date.now() };
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
    reply(res, answer);
  } finally {
    if (key) state.inFlight.set(key, state.inFlight.get(key)! - 1);
  }
}

export async function startFakeGithub(options: { latencyMs?: number } = {}): Promise<FakeGithub> {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const state = {
    appId: String(100_000 + Math.floor(Math.random() * 800_000)),
    publicKey,
    tokens: new Map(),
    userTokens: new Map(),
    codes: new Map(),
    users: new Map(),
    installations: new Map(),
    repos: new Map(),
    commits: new Map(),
    trees: new Map(),
    failures: [],
    inFlight: new Map(),
    maxInFlight: 0,
    logged: new Map(),
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
      state.codes.set(code, { login, expiresAt: Date.now() + CODE_MS, used: false });
      return code;
    },
    repositoryId: (repository) => state.repos.get(repository.toLowerCase())!.id,
    deliveries: [],
    redeliveryRequests: [],
    logDelivery: (request, statusCode) => logAttempt(state, request, statusCode, false),
    maxConcurrentPerRepository: () => state.maxInFlight,
    commit(repository, installationId, branch, files) {
      const key = repository.toLowerCase();
      const repo = state.repos.get(key) ?? {
        id: randomInt(1_000_000, 2 ** 40),
        fullName: repository,
        installationId,
        branches: new Map(),
        truncated: false,
      };
      state.repos.set(key, repo);
      const sha = hex40();
      state.commits.set(sha, { files: new Map(Object.entries(files)) });
      repo.branches.set(branch, sha);
      return sha;
    },
    setHead(repository, branch, sha) {
      state.repos.get(repository.toLowerCase())!.branches.set(branch, sha);
    },
    truncate(repository) {
      state.repos.get(repository.toLowerCase())!.truncated = true;
    },
    fail(match, status, times = 1, headers) {
      state.failures.push({ match, status, times, headers });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  state.fake = fake;
  return fake;
}
