/**
 * The events route's part of the conversation: channel messages (`message.channels`, `.groups`,
 * `.mpim`) and surface events (the app's thread opened, its Home tab opened), decided before
 * anything is enqueued.
 *
 * Cost, since these are most of what Slack sends once follow-ups are on: a message settled by its
 * own fields (src/slack/conversation.ts) costs nothing more; a thread reply costs one primary-key
 * lookup of `slack_threads` (src/slack/threads.ts), no more than the signature check's own read of
 * the connection, through a batched lookup (a burst of replies folds into a few queries, as the
 * verifier's lookups do) behind a bounded cache of the threads found answered (a thread, once
 * answered, stays so until it is swept). A reply in an unanswered thread is never cached, so a
 * thread that becomes answered is seen at once. Only a reply in an answered thread writes anything:
 * it is kept as the thread's context, or routed as a follow-up.
 */
import { createBatchedLookup, type BatchedLookup } from '../app/batched-lookup';
import { boundedCache, type BoundedCache } from '../app/bounded-caches';
import type { Db } from '../app/store/db';
import type { SlackConnection } from './connections';
import type { SlackSurfaceEvent } from './contract';
import { followUpAllowed, isChannelMessage, judgeChannelMessage, surfaceOf, type ConversationIgnoreReason } from './conversation';
import { classifyEvent, type EventClassification, type IneligibleReason } from './eligibility';
import type { SlackEventOf, SlackEventPayload } from './event-payloads';
import type { SlackSettings } from './settings';
import {
  claimSurfaceRequest,
  findAnsweredThreads,
  recordThreadMessage,
  threadKeyString,
  type AnsweredThread,
  type ThreadKey,
} from './threads';

/** Answered threads each process remembers, and for how long before it looks again. */
const ANSWERED_CACHE = { max: 50_000, ttlMs: 10 * 60_000 };
/** Thread lookups: two queries in flight at most, up to 500 threads each. */
const THREAD_LOOKUPS = { concurrency: 2, maxBatch: 500, maxWaiting: 20_000 };

/** An event the conversation routes: an invocation or a surface to enqueue (with what to undo if it cannot be), or why not. */
export type ConversationRoute =
  | { ignore: IneligibleReason | ConversationIgnoreReason }
  | { classified: Extract<EventClassification, { route: 'invocation' }> }
  | { classified: { route: 'surface'; surface: SlackSurfaceEvent }; undo: () => Promise<void> };

export interface ThreadRouter {
  /** The conversation's decision on an event, or undefined when the event is not one it decides (classifyEvent does). */
  route(connection: SlackConnection, event: SlackEventPayload, now: number): Promise<ConversationRoute | undefined>;
}

interface RouterState {
  deps: { db: Db; settings: Pick<SlackSettings, 'threadFollowUps' | 'homeMinIntervalMs'> };
  answered: BoundedCache<AnsweredThread>;
  lookup: BatchedLookup<AnsweredThread>;
}

export function createThreadRouter(deps: RouterState['deps'] & { now?: () => number }): ThreadRouter {
  const state: RouterState = {
    deps,
    answered: boundedCache<AnsweredThread>({ max: ANSWERED_CACHE.max, ttlMs: ANSWERED_CACHE.ttlMs, now: deps.now }),
    lookup: createBatchedLookup((keys) => findAnsweredThreads(deps.db, keys), THREAD_LOOKUPS),
  };
  return {
    route: async (connection, event, now) => {
      const surface = surfaceOf(event);
      if (surface !== undefined) return routeSurface(state, { connection, surface, now });
      if (!isChannelMessage(event)) return undefined;
      return routeChannelMessage(state, connection, event);
    },
  };
}

/** Whether the thread was answered: the cache, else the batched lookup (whose answered threads are cached). */
async function answeredThread(state: RouterState, key: ThreadKey): Promise<AnsweredThread | undefined> {
  const id = threadKeyString(key);
  const cached = state.answered.get(id);
  if (cached !== undefined) return cached;
  const found = await state.lookup(id);
  if (found !== undefined) state.answered.set(id, found);
  return found;
}

/** A surface event as it arrived: its connection, what `surfaceOf` made of it, and when. */
interface SurfaceArrival {
  connection: SlackConnection;
  surface: SlackSurfaceEvent | { ignore: ConversationIgnoreReason };
  now: number;
}

async function routeSurface(state: RouterState, { connection, surface, now }: SurfaceArrival): Promise<ConversationRoute> {
  if ('ignore' in surface) return { ignore: surface.ignore };
  if (!connection.enabled) return { ignore: 'connection_disabled' };
  const claim = await claimSurfaceRequest(state.deps.db, {
    connectionId: connection.id,
    slackUserId: surface.user,
    surface: surface.kind,
    now: new Date(now),
    minIntervalMs: state.deps.settings.homeMinIntervalMs,
  });
  if (!claim.claimed) return { ignore: 'surface_fresh' };
  return { classified: { route: 'surface', surface }, undo: claim.undo };
}

async function routeChannelMessage(
  state: RouterState,
  connection: SlackConnection,
  event: SlackEventOf<'message'>,
): Promise<ConversationRoute> {
  if (!connection.enabled) return { ignore: 'connection_disabled' };
  const mode = connection.threadFollowUps ?? state.deps.settings.threadFollowUps;
  const verdict = judgeChannelMessage(event, { botUserId: connection.botUserId, threadFollowUps: mode });
  if (verdict.kind === 'ignore') return { ignore: verdict.reason };
  const asInvocation = (followUp: boolean): ConversationRoute => {
    const classified = classifyEvent(event, { ...connection, channelMessages: true });
    if (classified.route !== 'invocation') return { ignore: classified.route === 'ignore' ? classified.reason : 'unsupported_type' };
    return { classified: followUp ? { ...classified, invocation: { ...classified.invocation, followUp: true } } : classified };
  };
  if (verdict.kind === 'mention') return asInvocation(false);
  const key = { connectionId: connection.id, ...verdict.thread };
  const thread = await answeredThread(state, key);
  if (thread === undefined) return { ignore: 'unanswered_thread' };
  const { message } = verdict;
  const notForBot = verdict.notForBot ?? (followUpAllowed(mode, message.user, thread.askerSlackUserId) ? undefined : 'not_asker');
  if (notForBot === undefined) return asInvocation(true);
  // Not for the bot, but part of the conversation a later request's run reads.
  await recordThreadMessage(state.deps.db, key, { ts: message.ts, userId: message.user, bot: false, text: message.text });
  return { ignore: notForBot };
}
