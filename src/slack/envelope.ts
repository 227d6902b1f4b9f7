/**
 * The Events API envelope (https://api.slack.com/apis/events-api#callback-field), parsed from
 * the raw bytes after the signature has been verified. Pure: no Koa, no I/O.
 */
import type { AppRateLimitedEvent } from '@slack/types';
import type { InvalidRequestDetail } from '../app/errors';
import { pathDeeperThan, TOO_DEEP_MESSAGE } from '../app/http/json-depth';
import type { SlackEventPayload } from './event-payloads';
import { parseAuthorizations, type EventAuthorization } from './ownership';

type SlackEnvelope =
  | { kind: 'url_verification'; challenge: string }
  | {
      kind: 'callback';
      type: string;
      teamId: string | undefined;
      apiAppId: string | undefined;
      /** Absent for envelopes that carry no event (then the route just acks). */
      eventId: string | undefined;
      /** The event, read as Slack documents its type (src/slack/event-payloads.ts). */
      event: SlackEventPayload | undefined;
      /** The installations the event is delivered for (src/slack/ownership.ts); absent in `app_rate_limited`. */
      authorizations: EventAuthorization[] | undefined;
      /** `app_rate_limited` (Slack's `AppRateLimitedEvent`): the minute (epoch seconds) Slack began dropping the app's events. */
      minuteRateLimited: AppRateLimitedEvent['minute_rate_limited'] | undefined;
    };

export type EnvelopeResult = { ok: true; envelope: SlackEnvelope } | { ok: false; details: InvalidRequestDetail[] };

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A string with something in it, else undefined: what an optional field of a Slack payload holds. */
export const nonEmptyString = (value: unknown): string | undefined => (typeof value === 'string' && value.length > 0 ? value : undefined);

export function parseEnvelope(raw: Buffer): EnvelopeResult {
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    return { ok: false, details: [{ message: 'Body is not valid JSON.', path: [] }] };
  }
  if (!isRecord(body)) return { ok: false, details: [{ message: 'Body must be a JSON object (an event envelope).', path: [] }] };
  const tooDeep = pathDeeperThan(body);
  if (tooDeep) return { ok: false, details: [{ message: TOO_DEEP_MESSAGE, path: tooDeep }] };
  if (typeof body.type !== 'string' || body.type.length === 0) {
    return { ok: false, details: [{ message: 'Envelope needs a string "type".', path: ['type'] }] };
  }
  if (body.type === 'url_verification') {
    if (typeof body.challenge !== 'string') {
      return { ok: false, details: [{ message: 'url_verification needs a string "challenge".', path: ['challenge'] }] };
    }
    return { ok: true, envelope: { kind: 'url_verification', challenge: body.challenge } };
  }
  return {
    ok: true,
    envelope: {
      kind: 'callback',
      type: body.type,
      teamId: nonEmptyString(body.team_id),
      apiAppId: nonEmptyString(body.api_app_id),
      eventId: nonEmptyString(body.event_id),
      event: isRecord(body.event) ? body.event : undefined,
      authorizations: parseAuthorizations(body.authorizations),
      minuteRateLimited:
        typeof body.minute_rate_limited === 'number' && Number.isSafeInteger(body.minute_rate_limited)
          ? body.minute_rate_limited
          : undefined,
    },
  };
}

/** Slash commands are form-encoded; these are the fields we need. */
interface SlashCommand {
  teamId: string;
  apiAppId: string | undefined;
  userId: string;
  command: string | undefined;
  channelId: string | undefined;
  /** What follows the command (`cancel`, `status`, `help`), trimmed; empty for the bare command. */
  text: string;
  /** Slack's id of this command's invocation: unique per command. */
  triggerId: string | undefined;
}

export type SlashCommandResult = { ok: true; command: SlashCommand } | { ok: false; details: InvalidRequestDetail[] };

/** Slack's certificate check of a slash-command URL: `ssl_check=1`, with no team or user. */
export function isSslCheck(raw: Buffer): boolean {
  return new URLSearchParams(raw.toString('utf8')).get('ssl_check') === '1';
}

export function parseSlashCommand(raw: Buffer): SlashCommandResult {
  const form = new URLSearchParams(raw.toString('utf8'));
  const details: InvalidRequestDetail[] = [];
  const teamId = form.get('team_id') ?? '';
  const userId = form.get('user_id') ?? '';
  if (!teamId) details.push({ message: 'Required form field.', path: ['team_id'] });
  if (!userId) details.push({ message: 'Required form field.', path: ['user_id'] });
  if (details.length > 0) return { ok: false, details };
  return {
    ok: true,
    command: {
      teamId,
      userId,
      apiAppId: form.get('api_app_id') || undefined,
      command: form.get('command') || undefined,
      channelId: form.get('channel_id') || undefined,
      text: (form.get('text') ?? '').trim(),
      triggerId: form.get('trigger_id') || undefined,
    },
  };
}

/**
 * A `block_actions` interaction (https://api.slack.com/reference/interaction-payloads/block-actions):
 * form-encoded, its JSON in the `payload` field. Only the fields we use.
 */
export interface BlockActions {
  teamId: string | undefined;
  apiAppId: string | undefined;
  userId: string;
  channelId: string | undefined;
  /** The thread of the message the button is on, for an ephemeral answer in it. */
  threadTs: string | undefined;
  /** Where the clicker's answer goes (https://docs.slack.dev/interactivity/handling-user-interaction#message_responses). */
  responseUrl: string | undefined;
  /** Slack's id of this interaction: unique per click. */
  triggerId: string | undefined;
  actions: { actionId: string; value: string | undefined }[];
}

/** Any other interaction: only where it claims to come from (checked like a block action's). */
interface OtherInteraction {
  type: string;
  teamId: string | undefined;
  apiAppId: string | undefined;
}

export type InteractionResult = { ok: true; interaction: BlockActions | OtherInteraction } | { ok: false; details: InvalidRequestDetail[] };

export function parseInteraction(raw: Buffer): InteractionResult {
  const field = new URLSearchParams(raw.toString('utf8')).get('payload');
  if (field === null) return { ok: false, details: [{ message: 'Required form field.', path: ['payload'] }] };
  let body: unknown;
  try {
    body = JSON.parse(field);
  } catch {
    return { ok: false, details: [{ message: 'The payload is not valid JSON.', path: ['payload'] }] };
  }
  if (!isRecord(body) || typeof body.type !== 'string') {
    return { ok: false, details: [{ message: 'The payload must be an object with a string "type".', path: ['payload', 'type'] }] };
  }
  const tooDeep = pathDeeperThan(body);
  if (tooDeep) return { ok: false, details: [{ message: TOO_DEEP_MESSAGE, path: ['payload', ...tooDeep] }] };
  const team = isRecord(body.team) ? nonEmptyString(body.team.id) : undefined;
  if (body.type !== 'block_actions')
    return { ok: true, interaction: { type: body.type, teamId: team, apiAppId: nonEmptyString(body.api_app_id) } };
  const user = isRecord(body.user) ? nonEmptyString(body.user.id) : undefined;
  if (!user) return { ok: false, details: [{ message: 'block_actions needs user.id.', path: ['payload', 'user', 'id'] }] };
  const channel = isRecord(body.channel) ? nonEmptyString(body.channel.id) : undefined;
  const message = isRecord(body.message) ? body.message : {};
  const actions = (Array.isArray(body.actions) ? body.actions : []).filter(isRecord).map((action) => ({
    actionId: nonEmptyString(action.action_id) ?? '',
    value: nonEmptyString(action.value),
  }));
  return {
    ok: true,
    interaction: {
      teamId: team,
      apiAppId: nonEmptyString(body.api_app_id),
      userId: user,
      channelId: channel,
      threadTs: nonEmptyString(message.thread_ts) ?? nonEmptyString(message.ts),
      responseUrl: nonEmptyString(body.response_url),
      triggerId: nonEmptyString(body.trigger_id),
      actions,
    },
  };
}
