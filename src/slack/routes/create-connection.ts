/**
 * POST /v1/integrations/slack/connections (admins): a draft connection and its app manifest. The
 * admin creates the Slack app from the manifest, sets the app's credentials
 * (src/slack/routes/set-credentials.ts), then installs it (src/slack/routes/install-url.ts).
 */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { authResponses } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import { createSlackConnectionDraft } from '../connections';
import { effectiveConversation, recordAppHas } from '../conversation-settings';
import { manifestNeeds } from '../manifest';
import { ChannelIds, ManifestBody, manifestOf, SLACK_TAGS } from './connection-shared';
import type { SlackRouteDeps } from './shared';

type Deps = Pick<SlackRouteDeps, 'db' | 'settings' | 'platform' | 'now'>;

const DraftRequest = z
  .object({
    name: z
      .string()
      .trim()
      .min(1)
      .max(35)
      .optional()
      .openapi({ description: "The app's name in Slack (at most 35 characters, Slack's limit); default SLACK_APP_NAME." }),
    channels: ChannelIds.optional(),
  })
  .strict()
  .optional()
  .openapi('SlackConnectionDraftRequest');

const DraftCreated = z.object({ connectionId: z.string(), manifest: ManifestBody }).openapi('SlackConnectionDraft');

async function createDraft(deps: Deps, principal: Principal, body: z.output<typeof DraftRequest>): Promise<Reply> {
  const connection = await createSlackConnectionDraft(
    deps.db,
    { organizationId: principal.organizationId, name: body?.name ?? deps.settings.appName, channels: body?.channels },
    new Date(deps.now()),
  );
  // The app is made from this manifest: until an install says otherwise, it has what the manifest has.
  const conversation = effectiveConversation(undefined, deps.settings.threadFollowUps);
  await recordAppHas(deps.db, connection.connectionId, manifestNeeds(conversation));
  return { status: 201, body: { connectionId: connection.connectionId, manifest: manifestOf(deps, connection, conversation) } };
}

export function createCreateConnectionRoute(deps: Deps): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/integrations/slack/connections',
    summary: 'A draft Slack connection and the app manifest to create its Slack app from (admins only)',
    description:
      'Paste the manifest into *Create New App → From a manifest* at api.slack.com/apps. Slack then checks the events ' +
      'Request URL, which fails while the draft has no signing secret: set the credentials, then press *Retry* under ' +
      '*Event Subscriptions*.',
    tags: SLACK_TAGS,
    auth: 'admin',
    body: { kind: 'json', schema: DraftRequest, limitBytes: 65_536 },
    responses: {
      201: { description: 'The draft: its id and its manifest.', schema: DraftCreated },
      ...authResponses,
    },
    handler: ({ principal, body }) => createDraft(deps, principal, body),
  });
}
