/**
 * PATCH /v1/integrations/slack/connections/{connectionId} (admins): routing on or off, the
 * channel allowlist (the same store function as `den slack connections update`), and the
 * conversation: follow-ups without a mention and the app's suggested prompts. The answer says
 * whether the Slack app now lacks what the settings need, with the manifest to apply.
 */
import { AppError } from '../../app/errors';
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { z } from '../../app/http/zod';
import { MAX_SUGGESTED_PROMPTS } from '../assistant';
import { getSlackConnectionView, updateSlackConnection } from '../connections';
import { updateConversation } from '../conversation-settings';
import {
  ChannelIds,
  connectionNotFound,
  connectionResponses,
  presentConnections,
  SlackConnectionBody,
  SuggestedPromptBody,
  SLACK_TAGS,
} from './connection-shared';
import { ConnectionParams, type SlackRouteDeps } from './shared';

type Deps = Pick<SlackRouteDeps, 'db' | 'secretKey' | 'now' | 'settings' | 'platform'>;

const UpdateRequest = z
  .object({
    enabled: z.boolean().optional().openapi({ description: 'false: events are acknowledged and not routed.' }),
    channels: ChannelIds.optional(),
    threadFollowUps: z
      .enum(['off', 'asker', 'members'])
      .optional()
      .openapi({
        description:
          'A reply without a mention in a thread the app answered is for the bot: never (`off`), from the thread’s asker, or ' +
          'from any linked member. On, the app must subscribe to `message.channels`, `.groups` and `.mpim`.',
      }),
    suggestedPrompts: z
      .array(SuggestedPromptBody)
      .min(1)
      .max(MAX_SUGGESTED_PROMPTS)
      .optional()
      .openapi({ description: 'What the app’s thread suggests when a member opens it (one to four).' }),
  })
  .strict()
  .openapi('SlackConnectionUpdate', { description: 'What to change; an empty object changes nothing and answers the connection.' });

const Conflict = z.object({ error: z.literal('uninstalled'), message: z.string() });

/** An admin's update: who asks, of which connection, and what to change. */
interface ConnectionUpdate {
  principal: Principal;
  connectionId: string;
  body: z.output<typeof UpdateRequest>;
}

async function update(deps: Deps, { principal, connectionId, body }: ConnectionUpdate): Promise<Reply> {
  const before = await getSlackConnectionView(deps.db, principal.organizationId, connectionId);
  if (!before) throw connectionNotFound();
  if (body.enabled === true && before.state === 'uninstalled') {
    throw new AppError('uninstalled', 409, {
      body: { error: 'uninstalled', message: 'Slack uninstalled this app: install it again (POST …/install) to enable it.' },
    });
  }
  const { threadFollowUps, suggestedPrompts, ...connection } = body;
  const now = new Date(deps.now());
  const after = await updateSlackConnection(deps, { connectionId, change: connection, now });
  await updateConversation(deps.db, { connectionId, change: { threadFollowUps, suggestedPrompts }, now });
  return { status: 200, body: (await presentConnections(deps, [after], true))[0] };
}

export function createUpdateConnectionRoute(deps: Deps): Route {
  return defineRoute({
    method: 'patch',
    path: '/v1/integrations/slack/connections/{connectionId}',
    summary: "Turn a Slack connection's routing on or off, or set its channel allowlist (admins only)",
    tags: SLACK_TAGS,
    auth: 'admin',
    params: ConnectionParams,
    body: { kind: 'json', schema: UpdateRequest, limitBytes: 65_536 },
    responses: {
      200: { description: 'The connection as it is now.', schema: SlackConnectionBody },
      409: { description: '`uninstalled`: an app Slack uninstalled is enabled by installing it again.', schema: Conflict },
      ...connectionResponses,
    },
    handler: ({ principal, params, body }) => update(deps, { principal, connectionId: params.connectionId, body }),
  });
}
