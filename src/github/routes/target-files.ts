/** GET /v1/connectors/github/targets/{targetId}/files: the target's snapshot, with content on request, bounded (admins only). */
import type { Principal } from '../../app/http/auth';
import { defineRoute, type Reply, type Route } from '../../app/http/route';
import { InvalidRequestError } from '../../app/http/schemas';
import type { GithubRouteDeps } from './shared';
import { adminOrNotFound, TAGS, TargetIdParams, targetNotFound, targetAuthResponses } from './target-shared';
import { z } from '../../app/http/zod';
import { findTarget } from '../target-records';
import { FILE_CONTENT_LIMITS, listFiles } from '../target-views';

type Deps = Pick<GithubRouteDeps, 'db' | 'settings' | 'ingress'>;
const badId = { 400: { description: 'Invalid target id.', schema: InvalidRequestError } };

const FileBody = z
  .object({
    path: z.string(),
    blobSha: z.string(),
    size: z.number().int(),
    status: z.enum(['ok', 'invalid', 'skipped']),
    type: z.enum(['file', 'symlink', 'submodule']).openapi({
      description:
        'What the path is in the tree: a `file`; a `symlink`, synced as the file it leads to within the repository, or ' +
        'skipped (`symlink_outside`, `symlink_loop`, `symlink_missing`); a `submodule`, listed with its commit and never fetched.',
    }),
    linkTarget: z.string().optional().openapi({
      description:
        'The path a link led to (the content is that file’s; also for a file below a linked directory), or the path a skipped link names.',
    }),
    commitSha: z.string().optional().openapi({ description: "A submodule's commit (also its `blobSha`, git's tree entry)." }),
    error: z.string().optional(),
    content: z.string().nullable().optional().openapi({ description: 'With `?content=true`; null past the size bounds.' }),
  })
  .openapi('GithubTargetFile');

const FilesQuery = z.object({ content: z.enum(['true', 'false']).default('false') });

async function getFiles(deps: Deps, principal: Principal, asked: { targetId: string; content: boolean }): Promise<Reply> {
  const { targetId, content } = asked;
  if (!(await findTarget(deps.db, principal.organizationId, targetId))) throw targetNotFound();
  return { status: 200, body: { files: await listFiles(deps.db, targetId, content) } };
}

export function createTargetFilesRoute(deps: Deps): Route {
  return defineRoute({
    tags: TAGS,
    auth: 'authenticated',
    params: TargetIdParams,
    method: 'get',
    path: '/v1/connectors/github/targets/{targetId}/files',
    summary: "A target's synced files (admins only)",
    description: `Content with \`?content=true\`, up to ${FILE_CONTENT_LIMITS.perFile} bytes a file and ${FILE_CONTENT_LIMITS.total} in all.`,
    query: FilesQuery,
    responses: {
      200: { description: 'The snapshot, by path.', schema: z.object({ files: z.array(FileBody) }) },
      ...badId,

      ...targetAuthResponses,
    },
    handler: ({ principal, params, query }) =>
      getFiles(deps, adminOrNotFound(principal), { targetId: params.targetId, content: query.content === 'true' }),
  });
}
