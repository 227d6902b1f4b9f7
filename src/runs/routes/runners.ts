/**
 * The runner routes: mint or renew a runner token, list the runtimes and whether they are online,
 * delete one. What they do is in src/runs/runners.ts; these validate and answer.
 */
import { errors } from '../../app/errors';
import { defineRoute, type Route } from '../../app/http/route';
import { InvalidRequestError, authResponses } from '../../app/http/schemas';
import type { RunDeps } from '../deps';
import {
  RUNNER_TAGS,
  RUNNER_TOKEN_BODY_LIMIT_BYTES,
  RunnerIdParams,
  RunnerListBody,
  RunnerTokenBody,
  RunnerTokenRequest,
} from '../runner-schemas';
import { deleteRunner, listRunnerViews, mintRunnerToken } from '../runners';

export function createRunnerTokenRoute(deps: RunDeps): Route {
  return defineRoute({
    method: 'post',
    path: '/v1/automation-runners/token',
    summary: 'Mint a runner token for a runtime, or renew one',
    description:
      'An addition to the interface spec. With an API key or a session: a new runner of the caller, and its first token. With ' +
      'a runner token: a new token of the same runner (renewal; the old one works until it expires). The token lives `RUNNER_TOKEN_TTL`, ' +
      "is bound to the organization, the member and the runner, and opens only the automation-run routes, with the member's " +
      'reach (its own runs). It stops at once when the runner is deleted, its member removed, or the API key that minted it revoked.',
    tags: RUNNER_TAGS,
    auth: 'authenticated',
    runnerToken: true,
    body: { kind: 'json', schema: RunnerTokenRequest, limitBytes: RUNNER_TOKEN_BODY_LIMIT_BYTES },
    responses: {
      201: { description: 'The token, shown once.', schema: RunnerTokenBody },
      400: { description: 'Invalid body.', schema: InvalidRequestError },
      401: authResponses[401],
    },
    handler: async ({ body, principal }) => ({
      status: 201,
      body: await mintRunnerToken(deps.db, principal, { label: body?.label, ttlMs: deps.settings.runners.tokenTtlMs, now: deps.now() }),
    }),
  });
}

export function createListRunnersRoute(deps: RunDeps): Route {
  return defineRoute({
    method: 'get',
    path: '/v1/automation-runners',
    summary: "Runtimes and whether they are online: a member's own, or the organization's for owners and admins",
    description:
      'An addition to the interface spec. Every runner with a working runner token, and every runtime that used an API key within ' +
      '`RUNNER_TOKEN_TTL` (named by the key and its `x-den-runtime-label`). Online: seen long-polling a claim or heartbeating a run ' +
      "within `RUNNER_PRESENCE_WINDOW`. `paused`: the member's breaker is open after repeated runtime failures.",
    tags: RUNNER_TAGS,
    auth: 'authenticated',
    responses: { 200: { description: 'The runtimes, oldest first.', schema: RunnerListBody }, 401: authResponses[401] },
    handler: async ({ principal }) => ({
      status: 200,
      body: { runners: await listRunnerViews(deps.db, principal, { settings: deps.settings.runners, now: deps.now() }) },
    }),
  });
}

export function createDeleteRunnerRoute(deps: RunDeps): Route {
  return defineRoute({
    method: 'delete',
    path: '/v1/automation-runners/{runnerId}',
    summary: 'Delete a runtime: its runner tokens stop at once',
    description:
      "An addition to the interface spec. A member deletes their own; an owner or admin any of the organization's. A runner's " +
      'tokens stop at once, on every API process. An API-key runtime is only forgotten (revoke its key to stop it).',
    tags: RUNNER_TAGS,
    auth: 'authenticated',
    params: RunnerIdParams,
    responses: {
      204: { description: 'Deleted (or already deleted).' },
      400: { description: 'Invalid runner id.', schema: InvalidRequestError },
      401: authResponses[401],
      404: { description: "No such runtime, or another member's." },
    },
    handler: async ({ params, principal }) => {
      if (!(await deleteRunner(deps.db, principal, { runnerId: params.runnerId, now: deps.now() })))
        throw errors.notFound('No such runner.');
      return { status: 204 };
    },
  });
}
