/** GET /v1/connectors/github/sync-events: the organization's sync events, newest first (admins only). */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError, authResponses } from '../../app/http/schemas';
import { z } from '../../app/http/zod';
import { REPOSITORY_FULL_NAME } from '../target-records';
import { SYNC_STATUSES, listSyncEvents } from '../sync-event-listing';
import type { GithubRouteDeps } from './shared';

const SyncEvent = z
  .object({
    id: z.string(),
    deliveryId: z.string(),
    event: z.string(),
    action: z.string().nullable(),
    kind: z.enum(['push', 'full_resync']),
    targetId: z.string().nullable(),
    installationId: z.number().int(),
    repositoryId: z.number().int().nullable(),
    repository: z.string().nullable(),
    ref: z.string().nullable(),
    headSha: z.string().nullable(),
    status: z.enum(SYNC_STATUSES as [string, ...string[]]),
    outcome: z.string().nullable(),
    attempts: z.number().int().openapi({ description: 'Sync attempts that included this event.' }),
    error: z
      .object({ code: z.string().openapi({ example: 'github_404' }), message: z.string() })
      .nullable()
      .openapi({ description: 'Why the sync failed (or, while it is retried, the last failure); never a token.' }),
    syncedSha: z.string().nullable().openapi({ description: 'The branch head the sync that ended this event took.' }),
    startedAt: z.string().nullable(),
    finishedAt: z.string().nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi('GithubSyncEvent');

const SyncEventsQuery = z.object({
  status: z.enum(SYNC_STATUSES as [string, ...string[]]).optional(),
  repo: z.string().regex(REPOSITORY_FULL_NAME, 'must be owner/name').optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
});

async function getSyncEvents(
  deps: Pick<GithubRouteDeps, 'db'>,
  principal: Principal,
  query: z.output<typeof SyncEventsQuery>,
): Promise<Reply> {
  const { db } = deps;
  const events = await listSyncEvents(db, {
    organizationId: principal.organizationId,
    status: query.status as (typeof SYNC_STATUSES)[number] | undefined,
    repo: query.repo,
    limit: query.limit,
  });
  return { status: 200, body: { events } };
}

export function createSyncEventsRoute(deps: Pick<GithubRouteDeps, 'db'>): Route {
  return defineRoute({
    method: 'get',
    path: '/v1/connectors/github/sync-events',
    summary: "The organization's GitHub sync events, newest first (admins only)",
    description: 'What a sync executor picks up: one event per connected target and head, or a full resync after a rename.',
    tags: ['Connectors'],
    auth: 'admin',
    query: SyncEventsQuery,
    responses: {
      200: { description: 'Sync events, newest first.', schema: z.object({ events: z.array(SyncEvent) }) },
      400: { description: 'Invalid query.', schema: InvalidRequestError },
      ...authResponses,
    },
    handler: ({ principal, query }) => getSyncEvents(deps, principal, query),
  });
}
