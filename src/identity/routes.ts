import { z } from '../app/http/zod';
import { errors } from '../app/errors';
import { defineRoute, type Route } from '../app/http/route';
import { ROLES } from '../app/http/auth';
import type { Db } from '../app/store/db';
import { authResponses } from '../app/http/schemas';
import { listMembers, switchActiveOrganization } from './store';

const PrincipalBody = z
  .object({
    userId: z.string(),
    organizationId: z.string(),
    memberId: z.string(),
    role: z.enum(ROLES),
    via: z.enum(['api_key', 'session']),
  })
  .openapi('Principal');

export function createIdentityRoutes({ db }: { db: Db }): Route[] {
  const whoami = defineRoute({
    method: 'get',
    path: '/v1/me',
    summary: 'The caller as the service sees it',
    tags: ['Authentication'],
    auth: 'authenticated',
    responses: { 200: { description: 'The resolved principal.', schema: PrincipalBody }, 401: authResponses[401] },
    handler: async ({ principal }) => ({
      status: 200,
      body: {
        userId: principal.userId,
        organizationId: principal.organizationId,
        memberId: principal.memberId,
        role: principal.role,
        via: principal.via,
      },
    }),
  });

  const switchOrganization = defineRoute({
    method: 'post',
    path: '/v1/session/active-organization',
    summary: 'Switch the session to another organization the user belongs to (session only, §5 rule 2)',
    tags: ['Authentication'],
    auth: 'authenticated',
    sessionOnly: true,
    body: { kind: 'json', limitBytes: 16_384, schema: z.object({ organizationId: z.string().min(1).max(64) }) },
    responses: {
      200: { description: 'The session now acts in that organization.', schema: PrincipalBody },
      400: { description: 'Invalid body.' },
      ...authResponses,
      404: { description: 'The user is not a member of that organization.' },
    },
    handler: async ({ principal, body }) => {
      const switched = await switchActiveOrganization(db, {
        tokenHash: principal.sessionTokenHash!,
        userId: principal.userId,
        organizationId: body.organizationId,
      });
      if (!switched) throw errors.notFound('You are not a member of that organization.');
      return { status: 200, body: { userId: principal.userId, ...switched, via: 'session' } };
    },
  });

  const members = defineRoute({
    method: 'get',
    path: '/v1/organization/members',
    summary: "The caller's organization's live members (admins only)",
    tags: ['Members'],
    auth: 'admin',
    responses: {
      200: {
        description: 'Members, oldest first.',
        schema: z.object({
          members: z.array(
            z.object({ memberId: z.string(), userId: z.string(), email: z.string(), role: z.enum(ROLES), createdAt: z.string() }),
          ),
        }),
      },
      ...authResponses,
    },
    handler: async ({ principal }) => {
      const rows = await listMembers(db, principal.organizationId);
      return { status: 200, body: { members: rows.map((row) => ({ ...row, createdAt: row.createdAt.toISOString() })) } };
    },
  });

  return [whoami, switchOrganization, members];
}
