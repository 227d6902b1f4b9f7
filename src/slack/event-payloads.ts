/**
 * The events the service reads, as Slack documents them in `@slack/types`, so the code that reads
 * them uses Slack's own field names and types. Every field may be absent: the signature proves who
 * sent an event, not that it has every field Slack documents, so each value is still checked where
 * it is read (src/slack/eligibility.ts, src/slack/conversation.ts, src/slack/ownership.ts). The
 * envelope around an event is parsed in src/slack/envelope.ts. Pure: no Koa, no I/O.
 */
import type {
  AppHomeOpenedEvent,
  AppMentionEvent,
  AppUninstalledEvent,
  AssistantThreadContextChangedEvent,
  AssistantThreadStartedEvent,
  GenericMessageEvent,
  TokensRevokedEvent,
} from '@slack/types';

/** Every field possibly absent, at any depth. */
type AsSent<T> = T extends readonly (infer U)[] ? AsSent<U>[] : T extends object ? { [K in keyof T]?: AsSent<T[K]> } : T;

/** An event of Slack's type `T`: its `type` as Slack names it, every other field possibly absent. */
type Sent<T extends { type: string }> = Pick<T, 'type'> & AsSent<Omit<T, 'type'>>;

/** An event as the envelope carries it: any JSON object, until its `type` narrows it (isEvent). */
export type SlackEventPayload = Record<string, unknown>;

/**
 * An event someone may ask with: an `app_mention`, or a `message` (a DM's; a channel's when it is
 * for the bot). Their fields are an `app_mention`'s, `subtype` and `files` included (a message with
 * a file, or a thread reply also sent to the channel, carries them too), and a message's
 * `channel_type`. `app_id`, which Slack sets on a message an app posted, is not in @slack/types.
 */
type AskingEvent = { type: AppMentionEvent['type'] | GenericMessageEvent['type'] } & AsSent<
  Omit<AppMentionEvent, 'type'> & Pick<GenericMessageEvent, 'channel_type'> & { app_id: string }
>;

/** The events the service tells apart by `type`, each as Slack documents it. */
interface KnownEvents {
  app_mention: AskingEvent & { type: 'app_mention' };
  message: AskingEvent & { type: 'message' };
  assistant_thread_started: Sent<AssistantThreadStartedEvent>;
  assistant_thread_context_changed: Sent<AssistantThreadContextChangedEvent>;
  app_home_opened: Sent<AppHomeOpenedEvent>;
  tokens_revoked: Sent<TokensRevokedEvent>;
  app_uninstalled: Sent<AppUninstalledEvent>;
}

/** The event of this `type`, as Slack documents it. */
export type SlackEventOf<T extends keyof KnownEvents> = KnownEvents[T];

/** Whether the event is of this `type`: then it is read as Slack documents that event (each value still checked). */
export function isEvent<T extends keyof KnownEvents>(event: SlackEventPayload, type: T): event is KnownEvents[T] {
  return event.type === type;
}
