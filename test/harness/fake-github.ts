/**
 * A fake GitHub REST API on 127.0.0.1 for the target sync and the reconcile (the App's delivery
 * log, and redeliveries that really send the logged delivery again). It speaks the real wire format and checks credentials the way GitHub does: the App JWT (RS256) is verified with
 * the App's public key on the App routes, and the installation token on every repository call.
 * It records every call, can answer scripted failures, and counts overlapping requests for one
 * repository (two syncs of one target at once would overlap, since every answer is delayed).
 */
import { createHash, generateKeyPairSync, randomBytes, verify, type KeyObject } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeGithubCall {
  method: string;
  path: string;
  /** `owner/name` for repository routes. */
  repository?: string;
  kind: 'token' | 'ref' | 'tree' | 'blob' | 'deliveries' | 'redeliver' | 'other';
  status: number;
  /** The Authorization header's scheme and the first characters, never the secret itself. */
  auth: 'jwt' | 'token' | 'none' | 'invalid';
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
  calls: FakeGithubCall[];
  /** Tokens handed out (for the test that checks none reaches the logs). */
  issuedTokens: string[];
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

interface State {
  appId: string;
  publicKey: KeyObject;
  tokens: Map<string, number>;
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

type Answer = { status: number; body?: unknown; headers?: Record<string, string> };

function reply(res: http.ServerResponse, answer: Answer): void {
  res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
  res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
}

const notFound: Answer = { status: 404, body: { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' } };

/** Who is calling: the App (a JWT that verifies), an installation (a token it issued), or nobody. */
function authOf(state: State, authorization: string | undefined): { kind: FakeGithubCall['auth']; installationId?: number } {
  if (!authorization) return { kind: 'none' };
  const [scheme, credential] = authorization.split(' ');
  if (scheme?.toLowerCase() === 'bearer' && credential && credential.split('.').length === 3) {
    return verifyJwt(credential, state.publicKey, state.appId, Math.floor(Date.now() / 1000)) ? { kind: 'jwt' } : { kind: 'invalid' };
  }
  const installationId = credential === undefined ? undefined : state.tokens.get(credential);
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

const REPO_ROUTE = /^\/repos\/([^/]+\/[^/]+)\/(git\/ref\/heads\/(.+)|commits\/(.+)|git\/trees\/([0-9a-f]{40})|git\/blobs\/([0-9a-f]{40}))$/;

function classify(method: string, path: string): { kind: FakeGithubCall['kind']; repository?: string; match?: RegExpExecArray } {
  if (method === 'POST' && /^\/app\/installations\/\d+\/access_tokens$/.test(path)) return { kind: 'token' };
  if (method === 'GET' && path === '/app/hook/deliveries') return { kind: 'deliveries' };
  if (method === 'POST' && /^\/app\/hook\/deliveries\/\d+\/attempts$/.test(path)) return { kind: 'redeliver' };
  const match = method === 'GET' ? REPO_ROUTE.exec(path) : null;
  if (!match) return { kind: 'other' };
  const kind = match[3] !== undefined || match[4] !== undefined ? 'ref' : match[5] !== undefined ? 'tree' : 'blob';
  return { kind, repository: match[1]!.toLowerCase(), match };
}

function answerRepo(state: State, route: ReturnType<typeof classify>, installationId: number | undefined, url: URL): Answer {
  const repo = state.repos.get(route.repository!);
  if (!repo || repo.installationId !== installationId) return notFound;
  const m = route.match!;
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

async function handle(state: State, req: http.IncomingMessage, res: http.ServerResponse, latencyMs: number): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
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
    const needsJwt = route.kind === 'token' || route.kind === 'deliveries' || route.kind === 'redeliver';
    let answer: Answer;
    if (route.kind === 'other') answer = notFound;
    else if (needsJwt ? auth.kind !== 'jwt' : auth.kind !== 'token') answer = { status: 401, body: { message: 'Bad credentials' } };
    else {
      const scripted = state.failures.find((f) => f.times > 0 && f.match(call));
      if (scripted) {
        scripted.times -= 1;
        answer = { status: scripted.status, body: { message: `scripted ${scripted.status}` }, headers: scripted.headers };
      } else answer = needsJwt ? answerApp(state, route, path, url) : answerRepo(state, route, auth.installationId, url);
    }
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
    repos: new Map(),
    commits: new Map(),
    trees: new Map(),
    failures: [],
    inFlight: new Map(),
    maxInFlight: 0,
    logged: new Map(),
  } as unknown as State;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => void handle(state, req, res, options.latencyMs ?? 15));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const fake: FakeGithub = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    appId: state.appId,
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    calls: [],
    issuedTokens: [],
    deliveries: [],
    redeliveryRequests: [],
    logDelivery: (request, statusCode) => logAttempt(state, request, statusCode, false),
    maxConcurrentPerRepository: () => state.maxInFlight,
    commit(repository, installationId, branch, files) {
      const key = repository.toLowerCase();
      const repo = state.repos.get(key) ?? { installationId, branches: new Map(), truncated: false };
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
