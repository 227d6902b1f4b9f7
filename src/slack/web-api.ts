/**
 * Slack's Web API through @slack/web-api (https://docs.slack.dev/tools/node-slack-sdk/web-api),
 * with a verdict that tells the caller whether and when to retry. The client never retries and
 * never waits by itself: Temporal retries, and a rate-limited call (HTTP 429, `Retry-After` in
 * seconds, https://docs.slack.dev/apis/web-api/rate-limits) is rejected at once so the workflow
 * waits on a timer.
 */
import {
  LogLevel,
  WebAPIHTTPError,
  WebAPIPlatformError,
  WebAPIRateLimitedError,
  WebClient,
  type Logger,
  type WebAPICallResult,
} from '@slack/web-api';

export type SlackApiResult =
  { ok: true; body: Record<string, unknown> } | { ok: false; retryable: boolean; error: string; retryAfterMs?: number };

/** Slack errors worth another try; everything else (channel_not_found, invalid_auth…) is final. */
const RETRYABLE_ERRORS = new Set(['ratelimited', 'internal_error', 'fatal_error', 'service_unavailable', 'request_timeout']);

const MAX_RETRY_AFTER_MS = 5 * 60_000;

export function parseRetryAfter(value: string | null | undefined): number | undefined {
  if (!value || !/^\s*\d{1,6}\s*$/.test(value)) return undefined;
  return Math.min(Number(value) * 1000, MAX_RETRY_AFTER_MS);
}

/** The Web API methods the service calls. */
export type SlackApiMethod =
  | 'chat.postMessage'
  | 'chat.postEphemeral'
  | 'chat.update'
  | 'chat.delete'
  | 'conversations.replies'
  | 'chat.startStream'
  | 'chat.appendStream'
  | 'chat.stopStream'
  | 'assistant.threads.setStatus'
  | 'assistant.threads.setSuggestedPrompts'
  | 'assistant.threads.setTitle'
  | 'views.publish'
  | 'chat.getPermalink';

/** Methods that post or change a message's mrkdwn: they go out with `parse: none`. */
const MRKDWN_METHODS: ReadonlySet<SlackApiMethod> = new Set(['chat.postMessage', 'chat.postEphemeral', 'chat.update']);
/** Methods whose text is Markdown (`markdown_text` and the chunks' texts). */
const MARKDOWN_METHODS: ReadonlySet<SlackApiMethod> = new Set(['chat.startStream', 'chat.appendStream', 'chat.stopStream']);

/** Slack's mention syntax: `<!channel>`, `<!here>`, `<!subteam^…>`, `<@U…>`, `<#C…>`. */
const MENTION_OPENER = /<([!@#])/g;

/** Text in which no mention is live: the `<` that would open one is escaped. */
export const defuseMentions = (text: string): string => text.replace(MENTION_OPENER, '&lt;$1');

/**
 * Markdown in which no mention is live: as defuseMentions, and a plain `@channel`, `@here` or
 * `@everyone` gets a zero-width space after its `@` (the streaming methods take no `parse`).
 */
export const defuseMarkdown = (text: string): string => defuseMentions(text).replace(/@(channel|here|everyone)\b/g, '@\u200b$1');

/** A block tree with every mrkdwn text object's mentions defused. */
function defuseBlocks(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(defuseBlocks);
  if (!value || typeof value !== 'object') return value;
  const object = Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, defuseBlocks(inner)]));
  return object.type === 'mrkdwn' && typeof object.text === 'string' ? { ...object, text: defuseMentions(object.text) } : object;
}

/** Streaming chunks with every text Slack shows defused (a task's title, details and output too). */
function defuseChunks(chunks: unknown): unknown {
  if (!Array.isArray(chunks)) return chunks;
  return chunks.map((chunk: Record<string, unknown>) =>
    Object.fromEntries(
      Object.entries(chunk).map(([key, value]) => [
        key,
        ['text', 'title', 'details', 'output'].includes(key) && typeof value === 'string' ? defuseMarkdown(value) : value,
      ]),
    ),
  );
}

/**
 * A message as the service posts, edits or streams it. The service never mentions anyone: a
 * message goes out with `parse: none`, since Slack's own parsing (chat.update's default is
 * `client`) would turn a plain `@channel` or `@here` into a live mention, and with any `<!…>`,
 * `<@…>` or `<#…>` left in its text defused; a streamed message's Markdown is defused as well.
 * The text was escaped where it was made (src/slack/mrkdwn.ts, src/slack/texts.ts); this is the
 * last guard at the one place messages leave, and it also covers a message made by an older
 * release before a deploy.
 */
function asPosted(method: SlackApiMethod, body: Record<string, unknown>): Record<string, unknown> {
  if (method === 'views.publish') return asPublished(body);
  if (MARKDOWN_METHODS.has(method)) {
    const markdown = typeof body.markdown_text === 'string' ? { markdown_text: defuseMarkdown(body.markdown_text) } : {};
    const chunks = body.chunks === undefined ? {} : { chunks: defuseChunks(body.chunks) };
    const blocks = body.blocks === undefined ? {} : { blocks: defuseBlocks(body.blocks) };
    return { ...body, ...markdown, ...chunks, ...blocks };
  }
  if (!MRKDWN_METHODS.has(method)) return body;
  const text = typeof body.text === 'string' ? { text: defuseMentions(body.text) } : {};
  const blocks = body.blocks === undefined ? {} : { blocks: defuseBlocks(body.blocks) };
  // chat.update gives a streamed message Slack closed its Markdown back (src/slack/stream-segments.ts).
  const markdown = typeof body.markdown_text === 'string' ? { markdown_text: defuseMarkdown(body.markdown_text) } : {};
  return { ...body, ...text, ...blocks, ...markdown, parse: 'none' };
}

/** A Home tab view as published: every mrkdwn text object of its blocks defused, as in a message. */
function asPublished(body: Record<string, unknown>): Record<string, unknown> {
  const view = body.view as Record<string, unknown> | undefined;
  if (view === undefined || view.blocks === undefined) return body;
  return { ...body, view: { ...view, blocks: defuseBlocks(view.blocks) } };
}

/** The client's own log lines are not the service's: dropped, as its failures come back as results. */
const quiet: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  setLevel: () => undefined,
  getLevel: () => LogLevel.ERROR,
  setName: () => undefined,
};

/**
 * A client for one bot token, or none (the OAuth exchange authenticates with the app's client
 * credentials): no retries (Temporal's), rate-limited calls rejected (the workflow waits).
 */
function clientFor(options: { baseUrl: string; token?: string; timeoutMs?: number }): WebClient {
  return new WebClient(options.token, {
    slackApiUrl: `${options.baseUrl.replace(/\/+$/, '')}/`,
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
    allowAbsoluteUrls: false,
    timeout: options.timeoutMs ?? 10_000,
    logger: quiet,
  });
}

/** A call's failure as a verdict: a 429 with its wait, a final or retryable Slack error, a 5xx, a network error. */
function failureOf(error: unknown): Extract<SlackApiResult, { ok: false }> {
  if (error instanceof WebAPIRateLimitedError) {
    return { ok: false, retryable: true, error: 'ratelimited', retryAfterMs: Math.min(error.retryAfter * 1000, MAX_RETRY_AFTER_MS) };
  }
  if (error instanceof WebAPIPlatformError) {
    const code = String(error.data.error);
    return { ok: false, retryable: RETRYABLE_ERRORS.has(code), error: code };
  }
  if (error instanceof WebAPIHTTPError) {
    return {
      ok: false,
      retryable: error.statusCode >= 500,
      error: `http_${error.statusCode}`,
      retryAfterMs: parseRetryAfter(error.headers['retry-after']),
    };
  }
  return { ok: false, retryable: true, error: `network: ${(error as Error)?.message ?? 'unknown'}` };
}

export async function callSlackApi(
  options: { baseUrl: string; token: string; timeoutMs?: number },
  method: SlackApiMethod,
  body: Record<string, unknown>,
): Promise<SlackApiResult> {
  try {
    const result: WebAPICallResult = await clientFor(options).apiCall(method, asPosted(method, body));
    return { ok: true, body: result as unknown as Record<string, unknown> };
  } catch (error) {
    return failureOf(error);
  }
}

/** A rotating app's pair (https://docs.slack.dev/authentication/using-token-rotation): the refresh token and how long the bot token lives. */
export interface TokenRotation {
  refreshToken: string;
  expiresInMs: number;
}

/** What `oauth.v2.access` answered for a bot install, or why it refused or failed. */
export type OAuthAccessResult =
  | {
      ok: true;
      install: {
        teamId: string | null;
        teamName: string | null;
        appId: string | null;
        botToken: string | null;
        botUserId: string | null;
        /** With token rotation on; null when the bot token never expires. */
        rotation: TokenRotation | null;
        /** The bot scopes Slack granted (its `scope`, comma-separated), when it said. */
        scopes: string[] | null;
      };
    }
  | (Extract<SlackApiResult, { ok: false }> & { refused: boolean });

/** The rotation part of an `oauth.v2.access` answer: both a refresh token and a lifetime, or none. */
function rotationOf(answer: { refresh_token?: string; expires_in?: number }): TokenRotation | null {
  if (!answer.refresh_token || typeof answer.expires_in !== 'number' || answer.expires_in <= 0) return null;
  return { refreshToken: answer.refresh_token, expiresInMs: answer.expires_in * 1000 };
}

/**
 * Exchanges an install's code (https://docs.slack.dev/reference/methods/oauth.v2.access) with the
 * app's client id and secret and the redirect URI the authorize page was given. A Slack error
 * (`invalid_code`, `bad_client_secret`, `bad_redirect_uri`…) is a refusal; an HTTP failure or a
 * network error is an outage. The token is only returned, never logged.
 */
export async function oauthV2Access(
  baseUrl: string,
  input: { clientId: string; clientSecret: string; code: string; redirectUri: string },
): Promise<OAuthAccessResult> {
  try {
    const answer = await clientFor({ baseUrl }).oauth.v2.access({
      client_id: input.clientId,
      client_secret: input.clientSecret,
      code: input.code,
      redirect_uri: input.redirectUri,
    });
    return {
      ok: true,
      install: {
        teamId: answer.team?.id ?? null,
        teamName: answer.team?.name ?? null,
        appId: answer.app_id ?? null,
        botToken: answer.token_type === 'bot' ? (answer.access_token ?? null) : null,
        botUserId: answer.bot_user_id ?? null,
        rotation: answer.token_type === 'bot' ? rotationOf(answer) : null,
        scopes: typeof answer.scope === 'string' ? answer.scope.split(',').filter(Boolean) : null,
      },
    };
  } catch (error) {
    const failure = failureOf(error);
    return { ...failure, refused: error instanceof WebAPIPlatformError && !failure.retryable };
  }
}

/**
 * Trades a rotating app's refresh token, once, for a new bot token and a new refresh token
 * (`oauth.v2.access` with `grant_type=refresh_token` and the app's client credentials). A Slack
 * error is final for that refresh token; an HTTP failure or a network error may be tried again.
 * The tokens are only returned, never logged.
 */
export async function oauthV2Refresh(
  baseUrl: string,
  input: { clientId: string; clientSecret: string; refreshToken: string },
): Promise<{ ok: true; token: TokenRotation & { accessToken: string } } | Extract<SlackApiResult, { ok: false }>> {
  try {
    const answer = await clientFor({ baseUrl }).oauth.v2.access({
      client_id: input.clientId,
      client_secret: input.clientSecret,
      grant_type: 'refresh_token',
      refresh_token: input.refreshToken,
    });
    const rotation = rotationOf(answer);
    if (!answer.access_token || rotation === null) return { ok: false, retryable: false, error: 'no_rotating_token' };
    return { ok: true, token: { accessToken: answer.access_token, ...rotation } };
  } catch (error) {
    return failureOf(error);
  }
}

/** Errors of `auth.revoke` that say the token is already dead: nothing is left to revoke. */
const TOKEN_GONE = new Set(['invalid_auth', 'token_revoked', 'account_inactive', 'not_authed', 'token_expired']);

/**
 * Revokes a token (https://docs.slack.dev/reference/methods/auth.revoke): `revoked`, or `gone`
 * when Slack says it no longer works anyway; any other failure is for the caller to report.
 */
export async function authRevoke(
  baseUrl: string,
  token: string,
): Promise<{ ok: true; outcome: 'revoked' | 'gone' } | Extract<SlackApiResult, { ok: false }>> {
  try {
    await clientFor({ baseUrl, token }).auth.revoke();
    return { ok: true, outcome: 'revoked' };
  } catch (error) {
    const failure = failureOf(error);
    return TOKEN_GONE.has(failure.error) ? { ok: true, outcome: 'gone' } : failure;
  }
}

/**
 * An interaction's answer through its `response_url` (https://docs.slack.dev/interactivity/handling-user-interaction#message_responses),
 * which works whether or not the bot is in the channel. Only to Slack's own hooks (`prefix`): the
 * URL comes from a signed payload, but the service posts nowhere else. Mentions defused as above.
 */
export async function postResponseUrl(
  prefix: string,
  url: string,
  message: { text: string; response_type?: 'ephemeral' | 'in_channel'; replace_original?: boolean; delete_original?: boolean },
): Promise<{ ok: boolean; error?: string }> {
  if (!url.startsWith(prefix)) return { ok: false, error: 'response_url_not_slack' };
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: JSON.stringify({ response_type: 'ephemeral', replace_original: false, ...message, text: defuseMentions(message.text) }),
      redirect: 'error',
      signal: AbortSignal.timeout(5_000),
    });
    await response.body?.cancel();
    return response.ok ? { ok: true } : { ok: false, error: `http_${response.status}` };
  } catch (error) {
    return { ok: false, error: `network: ${(error as Error)?.message ?? 'unknown'}` };
  }
}

/**
 * The metadata our thread replies carry (https://api.slack.com/metadata): the invocation's key,
 * so a retry can tell whether an earlier attempt's post already landed (src/slack/outbound.ts).
 */
const REPLY_EVENT_TYPE = 'den_run_reply';

export function replyMetadata(replyKey: string): Record<string, unknown> {
  return { event_type: REPLY_EVENT_TYPE, event_payload: { reply_key: replyKey } };
}

/** Our replies in a conversations.replies page, by the key their metadata carries: key → `ts` (the message's id). */
export function findReplies(page: Record<string, unknown>): Map<string, string> {
  const found = new Map<string, string>();
  for (const message of Array.isArray(page.messages) ? (page.messages as Record<string, unknown>[]) : []) {
    const metadata = message.metadata as { event_type?: unknown; event_payload?: { reply_key?: unknown } } | undefined;
    const key = metadata?.event_payload?.reply_key;
    if (metadata?.event_type === REPLY_EVENT_TYPE && typeof key === 'string') found.set(key, String(message.ts));
  }
  return found;
}
