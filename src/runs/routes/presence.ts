/** The claim and heartbeat routes, wrapped so that each call marks its runtime present (src/runs/presence.ts). */
import type { Route } from '../../app/http/route';
import type { PresenceTracker } from '../presence';

/** The run a claim or heartbeat answered for, when it holds it: a claim's run and attempt, a valid heartbeat's. */
function heldRun(body: unknown, runId: unknown): { runId: string; attempt: number } | undefined {
  const reply = body as { run?: { id?: unknown }; attempt?: unknown; leaseValid?: unknown } | undefined;
  if (typeof reply?.attempt !== 'number') return undefined;
  if (typeof reply.run?.id === 'string') return { runId: reply.run.id, attempt: reply.attempt };
  return reply.leaseValid === true && typeof runId === 'string' ? { runId, attempt: reply.attempt } : undefined;
}

export function withPresence(route: Route, presence: PresenceTracker): Route {
  return {
    ...route,
    async serve(ctx, principal, pipeline) {
      if (principal) presence.seen(principal, ctx.headers);
      const reply = await route.serve(ctx, principal, pipeline);
      const run = reply.status === 200 ? heldRun(reply.body, ctx.params.id) : undefined;
      if (principal && run) presence.seen(principal, ctx.headers, run);
      return reply;
    },
  };
}
