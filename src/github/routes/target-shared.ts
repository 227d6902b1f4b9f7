/** What the target routes share: their schemas and the 404. */
import { isAdmin, type Principal } from '../../app/http/auth';
import { authResponses } from '../../app/http/schemas';
import { errors } from '../../app/errors';
import { z } from '../../app/http/zod';

export const TAGS = ['Connectors'];

export const TargetIdParams = z.object({ targetId: z.string().regex(/^ght_[0-9a-z]{26}$/, 'must be a target id (ght_…)') });

const SyncCounts = z.object({
  added: z.number().int(),
  changed: z.number().int(),
  removed: z.number().int(),
  skipped: z.number().int(),
  invalid: z.number().int(),
});

export const TargetBody = z
  .object({
    targetId: z.string(),
    installationId: z.number().int(),
    repository: z.string(),
    ref: z.string().nullable().openapi({ description: "`refs/heads/…`; null follows the repository's default branch (`defaultBranch`)." }),
    defaultBranch: z
      .string()
      .nullable()
      .openapi({ description: "The repository's default branch as last learnt from a push or the repository API (null until then)." }),
    status: z.enum(['active', 'disabled', 'disconnected']),
    statusReason: z
      .string()
      .nullable()
      .openapi({
        description:
          'Why the target is not active: `installation_unbound` (no organization owns its installation yet), ' +
          '`installation_not_owned` (another organization does), `not_accessible` (its first sync found the installation ' +
          'cannot read the repository), `installation_deleted`, `installation_suspended`, `repository_removed`, …; ' +
          'or, while it stays active, a known state of its branch that clears by itself at the next sync that reads it: ' +
          '`ref_missing` (the branch is gone), `empty_repository` (no commit yet), `not_accessible` (the installation lost access).',
      }),
    repositoryVerified: z.boolean().openapi({
      description: 'The installation was seen to read the repository (at creation with App credentials, or by a sync).',
    }),
    sync: z.enum(['idle', 'queued', 'running', 'rate_limited', 'failed', 'not_configured']),
    until: z
      .string()
      .nullable()
      .openapi({ description: 'While `sync` is `rate_limited`: when GitHub lets the installation call again (every target on it waits).' }),
    syncedSha: z.string().nullable(),
    syncedAt: z.string().nullable(),
    pendingSha: z.string().nullable(),
    skipped: z.record(z.string(), z.number().int()).openapi({
      description:
        'How many paths of the snapshot are kept without content, by reason: `submodule`, `symlink_outside`, ' +
        '`symlink_loop`, `symlink_missing`, `too_large`, `too_many_files`, `binary`, … (the files list names them).',
    }),
    lastSync: z
      .object({
        status: z.string(),
        attempts: z.number().int(),
        counts: SyncCounts.nullable(),
        error: z.object({ code: z.string(), message: z.string() }).nullable(),
        at: z.string().nullable(),
      })
      .nullable(),
    createdAt: z.string(),
  })
  .openapi('GithubTarget');

const NotFoundError = z.object({ error: z.literal('not_found'), message: z.string() }).openapi('NotFoundError');

export const targetNotFound = () => errors.notFound('No such target in this organization.');

/**
 * The target routes take any member's credentials and answer a non-admin 404, as for another
 * organization's target: a member learns nothing of the organization's targets, not even that
 * the route exists for admins.
 */
export function adminOrNotFound(principal: Principal): Principal {
  if (!isAdmin(principal.role)) throw targetNotFound();
  return principal;
}

/** 401 and 429 as on every authenticated route; no 403, since a member gets the 404. */
const { 403: _forbidden, ...withoutForbidden } = authResponses;
export const targetAuthResponses = {
  ...withoutForbidden,
  404: { description: 'No such target in this organization, or the caller is not an admin.', schema: NotFoundError },
};
