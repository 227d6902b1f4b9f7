/**
 * A fake Slack Web API on 127.0.0.1, as strict as Slack where the service can meet it: it records
 * every call and renders each message call as Slack would (slackRendering), and it refuses what
 * Slack refuses.
 *
 * - Rate limits per workspace (the bot token) and method, by the method's tier
 *   (https://docs.slack.dev/apis/web-api/rate-limits): Tier 2 20, Tier 3 50, Tier 4 100 calls a
 *   minute, counted over a sliding window; over it, HTTP 429 with `Retry-After` in seconds. The
 *   window and the limits are options, so a test can scale time (its ratio stated where it does).
 *   chat.postMessage ("special": about one a second per channel, short bursts allowed) is limited
 *   per workspace and channel (test/harness/fake-slack-limits.ts).
 * - Tokens: one the fake never issued gets `invalid_auth`, an expired one `token_expired`
 *   (test/harness/fake-slack-oauth.ts); a test issues an operator's token with issueToken.
 * - Sizes: `msg_too_long` past 40,000 characters of `text`; `invalid_blocks` past 50 blocks or a
 *   section text past 3,000 characters; the streaming methods' `markdown_text` past 12,000
 *   characters is `msg_too_long`.
 * - Edits: `message_not_found` for a deleted message, `edit_window_closed` past the workspace's
 *   edit window (an option) and `cant_update_message` for a message marked so (refuseEdits).
 * - conversations.replies: `limit`, `cursor`, `oldest`/`latest`, metadata only with
 *   `include_all_metadata`; with `nonMarketplace`, what Slack allows commercially distributed
 *   apps off the Marketplace since 2025: one call a minute (the window), 15 messages a call.
 * - chat.startStream, chat.appendStream, chat.stopStream: a reply in a thread (`thread_ts`),
 *   `recipient_user_id` and `recipient_team_id` outside a DM, appends only to a message still
 *   streaming (`message_not_in_streaming_state`), Tier 2 for start and stop, Tier 4 for append;
 *   `streaming: false` answers `unknown_method` as an API without them would. A stream closes by
 *   itself past an age and refuses appends past a total size (test/harness/fake-slack-limits.ts);
 *   chat.update repairs a message Slack closed that way, with `markdown_text` as with `text`.
 * - response_url: `POST /actions/…` takes an interaction's answer (recorded as method `response_url`).
 * - The agent surface and the Home tab (fake-slack section "The conversation"): the assistant
 *   methods with their scopes and arguments (a `thread_ts` to setSuggestedPrompts of an agent app
 *   answers ok and sets nothing, as Slack's docs say; an app without the feature is `not_allowed`),
 *   views.publish with its 100 blocks, its 250 kB and its Home tab, chat.getPermalink of a message
 *   the fake holds, and people's own messages (`userMessage`) in threads for conversations.replies.
 * - Apps and installs (test/harness/fake-slack-oauth.ts): an app created from a manifest, whose
 *   events Request URL is checked as Slack checks it; the OAuth authorize page, `oauth.v2.access`
 *   and `auth.revoke`; a revoked token is refused by every method; `app_uninstalled` sent signed.
 *
 * @slack/web-api posts forms; their object fields (blocks, metadata, chunks) are JSON strings,
 * decoded here as Slack does.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from './wait';
import {
  addWorkspace,
  authorize,
  authRevoke,
  bearer,
  checkEventsUrl,
  createApp,
  issueCode,
  issueToken,
  newOAuthState,
  oauthV2Access,
  tokenRefusal,
  uninstall,
  type FakeSlackApp,
  type FakeToken,
  type OAuthState,
} from './fake-slack-oauth';
import {
  channelPostLimited,
  STRICT_DEFAULTS,
  streamCallBytes,
  streamLimitError,
  streamState,
  type StreamState,
  type StrictLimits,
} from './fake-slack-limits';

export type { FakeSlackApp } from './fake-slack-oauth';

export interface SlackApiCall {
  method: string;
  authorization: string | undefined;
  body: Record<string, unknown>;
  /** What Slack would show of a message call: its `text` and each mrkdwn text object, after Slack's own parsing (slackRendering). */
  rendered: string[];
  at: number;
  /** The HTTP status and Slack `error` the fake answered. */
  status: number;
  error?: string;
}

const MESSAGE_METHODS = new Set(['chat.postMessage', 'chat.postEphemeral', 'chat.update']);
const STREAM_METHODS = new Set(['chat.startStream', 'chat.appendStream', 'chat.stopStream']);

/** Slack's tier per method the service calls (https://docs.slack.dev/reference/methods). */
const METHOD_TIERS: Record<string, 2 | 3 | 4> = {
  'chat.update': 3,
  'chat.delete': 3,
  'conversations.replies': 3,
  'chat.postEphemeral': 4,
  'chat.startStream': 2,
  'chat.stopStream': 2,
  'chat.appendStream': 4,
  'assistant.threads.setSuggestedPrompts': 4,
  'assistant.threads.setTitle': 4,
  'views.publish': 4,
};

/** Form fields Slack reads as JSON. */
const JSON_FIELDS = ['blocks', 'metadata', 'chunks', 'attachments', 'view', 'prompts', 'loading_messages'];

const live = (text: string) => text.replace(/(^|[^\w&;\u200b])@(channel|here|everyone)\b/g, '$1<!$2>');

/**
 * A message call's texts as Slack renders them. Slack parses messages itself unless told not to:
 * `parse` other than `none` (chat.update defaults to `client`) turns a plain `@channel`, `@here`
 * or `@everyone` into a live mention, and so does a mrkdwn text object without `verbatim: true`.
 * The streaming methods have no `parse`: their Markdown is taken as parsed in full.
 */
function slackRendering(method: string, body: Record<string, unknown>): string[] {
  if (STREAM_METHODS.has(method)) return streamRendering(body);
  if (!MESSAGE_METHODS.has(method)) return [];
  const parse = body.parse ?? (method === 'chat.update' ? 'client' : 'none');
  const texts = [parse === 'none' ? String(body.text ?? '') : live(String(body.text ?? ''))];
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(visit);
    else if (value && typeof value === 'object') {
      const object = value as Record<string, unknown>;
      if (object.type === 'mrkdwn' && typeof object.text === 'string')
        texts.push(object.verbatim === true ? object.text : live(object.text));
      Object.values(object).forEach(visit);
    }
  };
  visit(body.blocks);
  return texts;
}

function streamRendering(body: Record<string, unknown>): string[] {
  const texts = typeof body.markdown_text === 'string' ? [live(body.markdown_text)] : [];
  for (const chunk of Array.isArray(body.chunks) ? (body.chunks as Record<string, unknown>[]) : []) {
    for (const key of ['text', 'title', 'details', 'output']) if (typeof chunk[key] === 'string') texts.push(live(chunk[key] as string));
  }
  return texts;
}

interface ScriptedReply {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
  /** chat.postMessage: keep the message although the reply says otherwise (Slack's partial successes). */
  accept?: boolean;
  /** Hang up without an answer (after accepting, with `accept`). */
  reset?: boolean;
}

/** A message the fake holds, as conversations.replies returns it. */
export interface FakeMessage {
  channel: string;
  ts: string;
  thread_ts?: string;
  text: string;
  blocks?: unknown;
  metadata?: unknown;
  /** Who wrote it: a person's message (userMessage); absent for the bot's. */
  user?: string;
  /** The texts chat.update gave it, in order. */
  edits: { text: string; blocks?: unknown; at: number }[];
  postedAt: number;
  /** A streamed message (chat.startStream): its Markdown so far, its chunks, and whether it was stopped. */
  stream?: {
    markdown: string;
    chunks: Record<string, unknown>[];
    stopped: boolean;
    blocks?: unknown;
    /** Its Markdown and task titles so far, in UTF-8 bytes (test/harness/fake-slack-limits.ts). */
    bytes?: number;
    /** chat.update gave it its text after Slack had closed it. */
    repaired?: boolean;
  };
}

export interface FakeSlackOptions {
  /** Slack's rate-limit window is a minute. */
  windowMs?: number;
  /** Calls per window per workspace and method, by tier. */
  tiers?: Partial<Record<2 | 3 | 4, number>>;
  /** conversations.replies as for a commercially distributed app off the Marketplace. */
  nonMarketplace?: boolean;
  /** Past this age a message can no longer be edited (a workspace setting); unset: no limit. */
  editWindowMs?: number;
  /** false: the streaming methods are unknown (an API without them). */
  streaming?: boolean;
  /** Slack's limits on a stream's age and size and on posts per channel (test/harness/fake-slack-limits.ts). */
  strict?: Partial<StrictLimits>;
  /** How long a rotating app's access token lives (Slack: 12 hours). */
  tokenLifetimeMs?: number;
  /** The bot token's scopes, for the methods that need one besides `chat:write` (default: every scope the manifest asks). */
  scopes?: string[];
  /** The app's messaging experience: `agent` (agent_view, the default), `assistant` (legacy assistant_view), or `none` (no agent feature). */
  experience?: 'agent' | 'assistant' | 'none';
  /** The app's Home tab is on (the default); off, views.publish of a home view is `not_enabled`. */
  homeTab?: boolean;
}

export interface FakeSlack {
  url: string;
  /** Where a test's interaction payloads send their `response_url`. */
  responseUrl(path?: string): string;
  calls: SlackApiCall[];
  /** Messages posted with chat.postMessage or chat.startStream (and accepted), in order. */
  messages: FakeMessage[];
  /** The next call(s) of `method` get these replies, in order, before the default answer. */
  script(method: string, ...replies: ScriptedReply[]): void;
  /** Deletes a message, as a person can: chat.update then answers `message_not_found`. */
  deleteMessage(channel: string, ts: string): void;
  /** chat.update of this message answers `cant_update_message` from now on. */
  refuseEdits(channel: string, ts: string): void;
  /** Changes the options in force (the window, the limits, the edit window, streaming). */
  configure(options: FakeSlackOptions): void;
  /** Waits for a call of `method` that `match` accepts. */
  waitForCall(method: string, match?: (call: SlackApiCall) => boolean, timeoutMs?: number): Promise<SlackApiCall>;
  /** Slack's OAuth authorize page (SLACK_OAUTH_AUTHORIZE_URL); the workspace is the `fake_slack_team` cookie. */
  authorizeUrl: string;
  /** *Create New App → From a manifest*: the app, after Slack's first check of its events Request URL. */
  createApp(manifest: Record<string, unknown>): Promise<FakeSlackApp>;
  /** The *Retry* button under *Event Subscriptions*: Slack checks the events Request URL again. */
  retryEventsUrl(app: FakeSlackApp): Promise<{ status: number; verified: boolean }>;
  /** A workspace a user can be signed in to (a new id, or the one given); its id. */
  addWorkspace(name?: string, teamId?: string): string;
  /** A code as the authorize page issues it, without the page. */
  issueCode(input: { clientId: string; redirectUri: string; teamId: string; scopes: string[] }): string;
  /** The bot tokens issued by `oauth.v2.access`, by token. */
  tokens: Map<string, FakeToken>;
  /** The app is uninstalled from the workspace: its tokens stop working and Slack sends `app_uninstalled`. */
  uninstall(app: FakeSlackApp, teamId: string): Promise<{ status: number; eventId: string }>;
  /** A bot token as an operator pastes it, known to the fake from now on; `expiresInMs` makes it expire. */
  issueToken(input: { token: string; teamId: string; appId: string; expiresInMs?: number }): string;
  /** Where a streamed message stands now: `streaming`, `stopped`, `stuck` (closed by Slack, not repaired) or `repaired`. */
  streamState(message: FakeMessage): StreamState | undefined;
  /** What the agent surface and the Home tab were given (section "The conversation"). */
  surface: FakeSurface;
  /** A person's message the fake holds (as Slack would): in conversations.replies, and chat.getPermalink finds it. */
  userMessage(message: { channel: string; ts: string; user: string; text: string; threadTs?: string }): void;
  close(): Promise<void>;
}

interface FakeState {
  options: Required<Omit<FakeSlackOptions, 'editWindowMs' | 'tiers' | 'strict' | 'tokenLifetimeMs'>> & {
    editWindowMs?: number;
    tiers: Record<2 | 3 | 4, number>;
    strict: StrictLimits;
  };
  surface: FakeSurface;
  messages: FakeMessage[];
  /** Call times per (workspace, method) within the window. */
  windows: Map<string, number[]>;
  /** chat.postMessage's bucket per (workspace, channel). */
  channelPosts: Map<string, { tokens: number; at: number }>;
  cantUpdate: Set<string>;
  lastTs: number;
  oauth: OAuthState;
}

type Answer = { status: number; body: Record<string, unknown>; headers?: Record<string, string> };

const ok = (body: Record<string, unknown> = {}): Answer => ({ status: 200, body: { ok: true, ...body } });
const fail = (error: string): Answer => ({ status: 200, body: { ok: false, error } });

export async function startFakeSlack(options: FakeSlackOptions = {}): Promise<FakeSlack> {
  const calls: SlackApiCall[] = [];
  const state: FakeState = {
    options: withDefaults(options),
    messages: [],
    windows: new Map(),
    channelPosts: new Map(),
    cantUpdate: new Set(),
    lastTs: 0,
    oauth: newOAuthState(),
    surface: newSurface(),
  };
  if (options.tokenLifetimeMs !== undefined) state.oauth.tokenLifetimeMs = options.tokenLifetimeMs;
  const scripted = new Map<string, ScriptedReply[]>();
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && (req.url ?? '').split('?')[0] === '/oauth/v2/authorize') {
      calls.push({ method: 'oauth.authorize', authorization: undefined, body: {}, rendered: [], at: Date.now(), status: 302 });
      return authorize(state.oauth, req, res);
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0]!;
      const method = path.startsWith('/actions/') ? 'response_url' : (path.split('/').pop() ?? '');
      const body = parseBody(req.headers['content-type'] ?? '', Buffer.concat(chunks).toString('utf8'));
      const call: SlackApiCall = {
        method,
        authorization: req.headers.authorization,
        body,
        rendered: slackRendering(method, body),
        at: Date.now(),
        status: 200,
      };
      calls.push(call);
      const reply = scripted.get(method)?.shift();
      if (reply) return answerScripted(state, call, reply, req, res);
      const answer =
        tokenRefusal(state.oauth, method, bearer(call.authorization, body)) ??
        rateLimited(state, call) ??
        postLimited(state, call) ??
        answerMethod(state, call);
      call.status = answer.status;
      if (answer.body.ok === false) call.error = String(answer.body.error);
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      res.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    url: `${origin}/api`,
    responseUrl: (path = `T0/${Date.now()}/x`) => `${origin}/actions/${path}`,
    calls,
    messages: state.messages,
    script(method, ...replies) {
      scripted.set(method, [...(scripted.get(method) ?? []), ...replies]);
    },
    deleteMessage(channel, ts) {
      const index = state.messages.findIndex((m) => m.channel === channel && m.ts === ts);
      if (index >= 0) state.messages.splice(index, 1);
    },
    refuseEdits(channel, ts) {
      state.cantUpdate.add(`${channel}/${ts}`);
    },
    configure(next) {
      state.options = withDefaults({ ...state.options, ...next, strict: { ...state.options.strict, ...next.strict } });
      if (next.tokenLifetimeMs !== undefined) state.oauth.tokenLifetimeMs = next.tokenLifetimeMs;
    },
    async waitForCall(method, match = () => true, timeoutMs = 20_000) {
      return waitFor(() => calls.find((c) => c.method === method && match(c)), timeoutMs, { what: `Slack ${method}`, intervalMs: 100 });
    },
    authorizeUrl: `${origin}/oauth/v2/authorize`,
    async createApp(manifest) {
      const app = createApp(state.oauth, manifest);
      await checkEventsUrl(app);
      return app;
    },
    retryEventsUrl: (app) => checkEventsUrl(app),
    addWorkspace: (name, teamId) => addWorkspace(state.oauth, name, teamId),
    issueCode: (input) => issueCode(state.oauth, input),
    tokens: state.oauth.tokens,
    uninstall: (app, teamId) => uninstall(state.oauth, app, teamId),
    issueToken: (input) => issueToken(state.oauth, input),
    streamState: (message) => streamState(message, state.options.strict),
    surface: state.surface,
    userMessage: (message) => {
      const { threadTs, user, ...rest } = message;
      state.messages.push({ ...rest, ...(threadTs ? { thread_ts: threadTs } : {}), user, edits: [], postedAt: Date.now() });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function withDefaults(options: FakeSlackOptions): FakeState['options'] {
  return {
    windowMs: options.windowMs ?? 60_000,
    tiers: { 2: 20, 3: 50, 4: 100, ...options.tiers },
    nonMarketplace: options.nonMarketplace ?? false,
    editWindowMs: options.editWindowMs,
    streaming: options.streaming ?? true,
    strict: { ...STRICT_DEFAULTS, ...options.strict },
    scopes: options.scopes ?? [...ALL_SCOPES],
    experience: options.experience ?? 'agent',
    homeTab: options.homeTab ?? true,
  };
}

function parseBody(contentType: string, raw: string): Record<string, unknown> {
  if (!contentType.startsWith('application/x-www-form-urlencoded')) {
    try {
      return JSON.parse(raw) as Record<string, unknown>;
    } catch {
      return { unparsed: raw };
    }
  }
  const body: Record<string, unknown> = Object.fromEntries(new URLSearchParams(raw));
  for (const field of JSON_FIELDS) {
    if (typeof body[field] !== 'string') continue;
    try {
      body[field] = JSON.parse(body[field]);
    } catch {
      // Slack refuses it later as what it is: a string where an object was due.
    }
  }
  return body;
}

function answerScripted(state: FakeState, call: SlackApiCall, reply: ScriptedReply, req: http.IncomingMessage, res: http.ServerResponse) {
  if (call.method === 'chat.postMessage' && reply.accept) answerMethod(state, call);
  call.status = reply.status;
  const body = (reply.body ?? { ok: false, error: 'ratelimited' }) as Record<string, unknown>;
  if (body.ok === false) call.error = String(body.error);
  if (reply.reset) return req.socket.destroy();
  res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
  res.end(JSON.stringify(body));
}

/** A 429 with Retry-After when the workspace has used its method's calls of the window; else the call counts. */
function rateLimited(state: FakeState, call: SlackApiCall): Answer | undefined {
  const { windowMs, tiers, nonMarketplace } = state.options;
  const tier = METHOD_TIERS[call.method];
  if (tier === undefined) return undefined;
  const limit = call.method === 'conversations.replies' && nonMarketplace ? 1 : tiers[tier];
  const key = `${call.authorization}/${call.method}`;
  const times = (state.windows.get(key) ?? []).filter((at) => at > call.at - windowMs);
  state.windows.set(key, times);
  if (times.length >= limit) {
    const retryAfter = Math.max(1, Math.ceil((times[0]! + windowMs - call.at) / 1000));
    return { status: 429, headers: { 'retry-after': String(retryAfter) }, body: { ok: false, error: 'ratelimited' } };
  }
  times.push(call.at);
  return undefined;
}

/** chat.postMessage past its channel's rate (test/harness/fake-slack-limits.ts), per workspace. */
function postLimited(state: FakeState, call: SlackApiCall): Answer | undefined {
  if (call.method !== 'chat.postMessage') return undefined;
  const token = bearer(call.authorization, call.body);
  const workspace = (token && state.oauth.tokens.get(token)?.teamId) ?? token;
  return channelPostLimited(state.channelPosts, `${workspace}/${String(call.body.channel)}`, state.options.strict);
}

/** A new message's ts: seconds and microseconds of now, strictly increasing, as Slack's are. */
function nextTs(state: FakeState): string {
  state.lastTs = Math.max(state.lastTs + 1, Date.now() * 1000);
  return `${Math.floor(state.lastTs / 1_000_000)}.${String(state.lastTs % 1_000_000).padStart(6, '0')}`;
}

function answerMethod(state: FakeState, call: SlackApiCall): Answer {
  const body = call.body;
  switch (call.method) {
    case 'chat.postMessage':
      return postMessage(state, body);
    case 'chat.postEphemeral':
      return contentError(body) ? fail(contentError(body)!) : ok({ message_ts: nextTs(state) });
    case 'chat.update':
      return updateMessage(state, body);
    case 'chat.delete':
      return deleteMessage(state, body);
    case 'conversations.replies':
      return replies(state, body);
    case 'chat.startStream':
    case 'chat.appendStream':
    case 'chat.stopStream':
      return state.options.streaming ? stream(state, call.method, body) : fail('unknown_method');
    case 'response_url':
      return ok();
    case 'oauth.v2.access':
      return oauthV2Access(state.oauth, call.authorization, body);
    case 'auth.revoke':
      return authRevoke(state.oauth, bearer(call.authorization, body));
    case 'assistant.threads.setStatus':
    case 'assistant.threads.setSuggestedPrompts':
    case 'assistant.threads.setTitle':
    case 'views.publish':
    case 'chat.getPermalink':
      return conversationMethod(state, call);
    default:
      return fail('unknown_method');
  }
}

/** What Slack refuses in a message's content: its size, its blocks. */
function contentError(body: Record<string, unknown>): string | undefined {
  const text = typeof body.text === 'string' ? body.text : '';
  if (text.length > 40_000) return 'msg_too_long';
  if (body.blocks === undefined) return text === '' ? 'no_text' : undefined;
  if (!Array.isArray(body.blocks) || body.blocks.length > 50) return 'invalid_blocks';
  for (const block of body.blocks as { type?: string; text?: { text?: unknown } }[]) {
    if (block.type === 'section' && typeof block.text?.text === 'string' && block.text.text.length > 3000) return 'invalid_blocks';
  }
  return undefined;
}

function postMessage(state: FakeState, body: Record<string, unknown>): Answer {
  const error = contentError(body);
  if (error) return fail(error);
  const ts = nextTs(state);
  state.messages.push({
    channel: String(body.channel),
    ts,
    thread_ts: body.thread_ts as string | undefined,
    text: String(body.text ?? ''),
    blocks: body.blocks,
    metadata: body.metadata,
    edits: [],
    postedAt: Date.now(),
  });
  return ok({ channel: body.channel, ts });
}

/** chat.update as Slack answers it: the edited message's channel, ts and text, or why not. */
function updateMessage(state: FakeState, body: Record<string, unknown>): Answer {
  const message = state.messages.find((m) => m.channel === body.channel && m.ts === body.ts);
  if (!message) return fail('message_not_found');
  if (state.cantUpdate.has(`${message.channel}/${message.ts}`)) return fail('cant_update_message');
  const window = state.options.editWindowMs;
  if (window !== undefined && Date.now() - message.postedAt > window) return fail('edit_window_closed');
  const markdown = typeof body.markdown_text === 'string' ? body.markdown_text : undefined;
  const error = markdown === undefined ? contentError(body) : markdown.length > 12_000 ? 'msg_too_long' : undefined;
  if (error) return fail(error);
  message.text = markdown ?? String(body.text ?? '');
  message.blocks = body.blocks;
  message.edits.push({ text: message.text, blocks: body.blocks, at: Date.now() });
  if (message.stream && !message.stream.stopped && streamState(message, state.options.strict) === 'stuck') message.stream.repaired = true;
  return ok({ channel: message.channel, ts: message.ts, text: message.text });
}

function deleteMessage(state: FakeState, body: Record<string, unknown>): Answer {
  const index = state.messages.findIndex((m) => m.channel === body.channel && m.ts === body.ts);
  if (index < 0) return fail('message_not_found');
  state.messages.splice(index, 1);
  return ok({ channel: body.channel, ts: body.ts });
}

/** The parent and its replies, oldest first, within `oldest`/`latest`, a page of `limit` from `cursor`. */
function replies(state: FakeState, body: Record<string, unknown>): Answer {
  const thread = state.messages
    .filter((m) => m.channel === body.channel && (m.thread_ts === body.ts || m.ts === body.ts))
    .filter((m) => body.oldest === undefined || Number(m.ts) >= Number(body.oldest))
    .filter((m) => body.latest === undefined || Number(m.ts) <= Number(body.latest))
    .sort((a, b) => Number(a.ts) - Number(b.ts));
  const asked = Number(body.limit ?? 1000);
  const limit = Math.max(1, Math.min(asked, state.options.nonMarketplace ? 15 : 1000));
  const start = body.cursor === undefined ? 0 : Number(Buffer.from(String(body.cursor), 'base64url').toString());
  const page = thread.slice(start, start + limit);
  const more = start + limit < thread.length;
  const withMetadata = body.include_all_metadata === 'true' || body.include_all_metadata === true;
  return ok({
    // A bot's message carries its bot_id; a person's (userMessage) its user.
    messages: page.map(({ edits: _e, postedAt: _p, stream: _s, ...m }) => ({
      ...(withMetadata ? m : { ...m, metadata: undefined }),
      ...(m.user === undefined ? { bot_id: 'BFAKEBOT' } : {}),
    })),
    has_more: more,
    response_metadata: { next_cursor: more ? Buffer.from(String(start + limit)).toString('base64url') : '' },
  });
}

/** The streaming methods: a reply that grows while it streams and is closed by chat.stopStream. */
function stream(state: FakeState, method: string, body: Record<string, unknown>): Answer {
  const markdown = typeof body.markdown_text === 'string' ? body.markdown_text : '';
  if (markdown.length > 12_000) return fail('msg_too_long');
  const chunks = Array.isArray(body.chunks) ? (body.chunks as Record<string, unknown>[]) : [];
  const added = streamCallBytes(markdown, chunks);
  if (method === 'chat.startStream') {
    if (added > state.options.strict.streamMaxBytes) return fail('msg_too_long');
    if (typeof body.thread_ts !== 'string' || typeof body.channel !== 'string') return fail('invalid_arguments');
    if (!String(body.channel).startsWith('D') && (!body.recipient_user_id || !body.recipient_team_id)) return fail('invalid_arguments');
    const ts = nextTs(state);
    const message: FakeMessage = {
      channel: body.channel,
      ts,
      thread_ts: body.thread_ts,
      text: markdown,
      edits: [],
      postedAt: Date.now(),
      stream: { markdown, chunks: [...chunks], stopped: false, bytes: added },
    };
    state.messages.push(message);
    return ok({ channel: body.channel, ts });
  }
  const message = state.messages.find((m) => m.channel === body.channel && m.ts === body.ts);
  if (!message) return fail('message_not_found');
  if (!message.stream || message.stream.stopped) return fail('message_not_in_streaming_state');
  const refused = streamLimitError(message as FakeMessage & { stream: NonNullable<FakeMessage['stream']> }, added, state.options.strict);
  if (refused) return fail(refused);
  message.stream.bytes = (message.stream.bytes ?? 0) + added;
  message.stream.markdown +=
    markdown + chunks.flatMap((c) => (c.type === 'markdown_text' && typeof c.text === 'string' ? [c.text] : [])).join('');
  message.stream.chunks.push(...chunks);
  message.text = message.stream.markdown;
  if (method === 'chat.stopStream') {
    message.stream.stopped = true;
    message.stream.blocks = body.blocks;
  }
  return ok({ channel: message.channel, ts: message.ts });
}

// ─── The conversation: the agent surface, the Home tab, people's messages ─────────────────────

/** Every scope the service's manifest asks (src/slack/manifest.ts). */
const ALL_SCOPES = [
  'app_mentions:read',
  'assistant:write',
  'chat:write',
  'commands',
  'channels:history',
  'groups:history',
  'im:history',
  'mpim:history',
] as const;

/** What the agent surface and the Home tab were given, in order. */
export interface FakeSurface {
  statuses: { channel: string; threadTs: string; status: string; at: number }[];
  /** Prompts as set; `ignored`: sent with a `thread_ts` to an agent app, which Slack drops without an error. */
  prompts: { channel: string; threadTs: string | null; prompts: { title: string; message: string }[]; ignored: boolean }[];
  titles: { channel: string; threadTs: string; title: string }[];
  /** The Home tab each user was last shown, and every publication. */
  homes: Map<string, { type: string; blocks: Record<string, unknown>[] }>;
  published: { user: string; view: { type: string; blocks: Record<string, unknown>[] }; at: number }[];
}

const newSurface = (): FakeSurface => ({ statuses: [], prompts: [], titles: [], homes: new Map(), published: [] });

/** Slack's largest view: "greater than 250kb" is view_too_large (views.publish). */
const VIEW_MAX_BYTES = 250_000;
/** Slack takes at most 100 blocks in a Home tab view. */
const VIEW_MAX_BLOCKS = 100;

const missingScope = (needed: string, provided: string[]): Answer => ({
  status: 200,
  body: { ok: false, error: 'missing_scope', needed, provided: provided.join(',') },
});

function conversationMethod(state: FakeState, call: SlackApiCall): Answer {
  const body = call.body;
  const { scopes, experience } = state.options;
  const str = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);
  switch (call.method) {
    case 'assistant.threads.setStatus': {
      if (!scopes.includes('chat:write') && !scopes.includes('assistant:write')) return missingScope('chat:write', scopes);
      const channel = str(body.channel_id);
      const threadTs = str(body.thread_ts);
      if (!channel || !threadTs || typeof body.status !== 'string') return fail('invalid_arguments');
      state.surface.statuses.push({ channel, threadTs, status: body.status, at: Date.now() });
      return ok();
    }
    case 'assistant.threads.setSuggestedPrompts':
      return setSuggestedPrompts(state, body);
    case 'assistant.threads.setTitle': {
      if (!scopes.includes('assistant:write')) return missingScope('assistant:write', scopes);
      if (experience === 'none') return fail('not_allowed');
      const channel = str(body.channel_id);
      const threadTs = str(body.thread_ts);
      const title = str(body.title);
      if (!channel || !threadTs || !title) return fail('invalid_arguments');
      state.surface.titles.push({ channel, threadTs, title });
      return ok();
    }
    case 'views.publish':
      return publishView(state, body);
    default:
      return permalink(state, body);
  }
}

function setSuggestedPrompts(state: FakeState, body: Record<string, unknown>): Answer {
  const { scopes, experience } = state.options;
  if (!scopes.includes('assistant:write')) return missingScope('assistant:write', scopes);
  if (experience === 'none') return fail('not_allowed');
  const channel = typeof body.channel_id === 'string' ? body.channel_id : '';
  const prompts = body.prompts;
  const valid =
    Array.isArray(prompts) &&
    prompts.length >= 1 &&
    prompts.length <= 4 &&
    prompts.every((p: Record<string, unknown>) => typeof p?.title === 'string' && typeof p?.message === 'string');
  if (channel === '' || !valid) return fail('invalid_arguments');
  const threadTs = typeof body.thread_ts === 'string' ? body.thread_ts : null;
  const ignored = experience === 'agent' && threadTs !== null;
  state.surface.prompts.push({ channel, threadTs, prompts: prompts as FakeSurface['prompts'][number]['prompts'], ignored });
  return ok();
}

function publishView(state: FakeState, body: Record<string, unknown>): Answer {
  const view = body.view as { type?: unknown; blocks?: unknown } | undefined;
  const user = typeof body.user_id === 'string' ? body.user_id : '';
  if (user === '' || !view || typeof view !== 'object' || !Array.isArray(view.blocks)) return fail('invalid_arguments');
  if (view.type === 'home' && !state.options.homeTab) return fail('not_enabled');
  if (view.type !== 'home' || view.blocks.length > VIEW_MAX_BLOCKS) return fail('invalid_arguments');
  if (Buffer.byteLength(JSON.stringify(view)) > VIEW_MAX_BYTES) return fail('view_too_large');
  const published = { type: 'home', blocks: view.blocks as Record<string, unknown>[] };
  state.surface.homes.set(user, published);
  state.surface.published.push({ user, view: published, at: Date.now() });
  return ok({ view: { id: `V${state.surface.published.length}`, type: 'home', blocks: view.blocks } });
}

function permalink(state: FakeState, body: Record<string, unknown>): Answer {
  const message = state.messages.find((m) => m.channel === body.channel && m.ts === body.message_ts);
  if (!message) return fail('message_not_found');
  return ok({ channel: message.channel, permalink: `https://fake-slack.test/archives/${message.channel}/p${message.ts.replace('.', '')}` });
}
