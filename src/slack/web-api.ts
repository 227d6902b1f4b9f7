/**
 * A minimal Slack Web API client (https://api.slack.com/web): POST JSON with the bot token,
 * and a verdict that tells the caller whether and when to retry. Rate limits come back as HTTP
 * 429 with `Retry-After` in seconds (https://api.slack.com/apis/rate-limits); the activity
 * turns that into Temporal's next retry delay.
 */
export type SlackApiResult =
  { ok: true; body: Record<string, unknown> } | { ok: false; retryable: boolean; error: string; retryAfterMs?: number };

/** Slack errors worth another try; everything else (channel_not_found, invalid_auth…) is final. */
const RETRYABLE_ERRORS = new Set(['ratelimited', 'internal_error', 'fatal_error', 'service_unavailable', 'request_timeout']);

const MAX_RETRY_AFTER_MS = 5 * 60_000;

export function parseRetryAfter(value: string | null): number | undefined {
  if (!value || !/^\s*\d{1,6}\s*$/.test(value)) return undefined;
  return Math.min(Number(value) * 1000, MAX_RETRY_AFTER_MS);
}

/** Write methods take JSON; read methods such as conversations.replies take a form. */
export type SlackApiMethod = 'chat.postMessage' | 'chat.postEphemeral' | 'chat.update' | 'conversations.replies';
const FORM_METHODS: ReadonlySet<SlackApiMethod> = new Set(['conversations.replies']);

/** Slack's mention syntax: `<!channel>`, `<!here>`, `<!subteam^…>`, `<@U…>`, `<#C…>`. */
const MENTION = /<([!@#])/g;

/** Text in which no mention is live: the `<` that would open one is escaped. */
export const defuseMentions = (text: string): string => text.replace(MENTION, '&lt;$1');

/** A block tree with every mrkdwn text object's mentions defused. */
function defuseBlocks(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(defuseBlocks);
  if (!value || typeof value !== 'object') return value;
  const object = Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, defuseBlocks(inner)]));
  return object.type === 'mrkdwn' && typeof object.text === 'string' ? { ...object, text: defuseMentions(object.text) } : object;
}

/**
 * A message as the service posts or edits it. The service never mentions anyone: a message goes
 * out with `parse: none`, since Slack's own parsing (chat.update's default is `client`) would
 * turn a plain `@channel` or `@here` into a live mention, and with any `<!…>`, `<@…>` or `<#…>`
 * left in its text defused. The text was escaped where it was made (src/slack/mrkdwn.ts,
 * src/slack/texts.ts); this is the last guard at the one place messages leave, and it also covers
 * a message made by an older release before a deploy.
 */
function asPosted(method: SlackApiMethod, body: Record<string, unknown>): Record<string, unknown> {
  if (FORM_METHODS.has(method)) return body;
  const text = typeof body.text === 'string' ? { text: defuseMentions(body.text) } : {};
  const blocks = body.blocks === undefined ? {} : { blocks: defuseBlocks(body.blocks) };
  return { ...body, ...text, ...blocks, parse: 'none' };
}

export async function callSlackApi(
  options: { baseUrl: string; token: string; timeoutMs?: number },
  method: SlackApiMethod,
  body: Record<string, unknown>,
): Promise<SlackApiResult> {
  let response: Response;
  const form = FORM_METHODS.has(method);
  try {
    response = await fetch(`${options.baseUrl}/${method}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${options.token}`,
        'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json; charset=utf-8',
      },
      body: form
        ? new URLSearchParams(Object.entries(body).map(([k, v]): [string, string] => [k, String(v)])).toString()
        : JSON.stringify(asPosted(method, body)),
      signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
    });
  } catch (error) {
    return { ok: false, retryable: true, error: `network: ${(error as Error)?.message ?? 'unknown'}` };
  }
  const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
  if (response.status === 429) return { ok: false, retryable: true, error: 'ratelimited', retryAfterMs: retryAfterMs ?? 1000 };
  if (response.status >= 500) return { ok: false, retryable: true, error: `http_${response.status}`, retryAfterMs };
  let parsed: unknown;
  try {
    parsed = await response.json();
  } catch {
    return { ok: false, retryable: response.status >= 500, error: `http_${response.status}_not_json` };
  }
  const result = (parsed ?? {}) as Record<string, unknown>;
  if (response.ok && result.ok === true) return { ok: true, body: result };
  const error = typeof result.error === 'string' ? result.error : `http_${response.status}`;
  return { ok: false, retryable: RETRYABLE_ERRORS.has(error), error, retryAfterMs };
}

/**
 * The metadata our thread replies carry (https://api.slack.com/metadata): the invocation's key,
 * so a retry can tell whether an earlier attempt's post already landed.
 */
const REPLY_EVENT_TYPE = 'den_run_reply';

export function replyMetadata(replyKey: string): Record<string, unknown> {
  return { event_type: REPLY_EVENT_TYPE, event_payload: { reply_key: replyKey } };
}

/** Our reply with this key in a conversations.replies page: its `ts` (the message's id), or undefined. */
export function findReply(page: Record<string, unknown>, replyKey: string): string | undefined {
  const messages = Array.isArray(page.messages) ? (page.messages as Record<string, unknown>[]) : [];
  const found = messages.find((message) => {
    const metadata = message.metadata as { event_type?: unknown; event_payload?: { reply_key?: unknown } } | undefined;
    return metadata?.event_type === REPLY_EVENT_TYPE && metadata.event_payload?.reply_key === replyKey;
  });
  return found === undefined ? undefined : String(found.ts);
}
