/**
 * Removing a connection, for the API's `DELETE` and `den slack connections delete` alike: the bot
 * token revoked at Slack (`auth.revoke`), then the connection and everything of it removed, its
 * invocations waiting for a link told (src/slack/connection-lifecycle.ts). A rotating token is
 * refreshed first when due (an expired one revokes nothing, while its refresh token still works).
 * A token Slack says is dead already counts as revoked; Slack failing keeps the connection, so the
 * removal can be asked again.
 */
import type { IngressGateway } from '../app/ingress';
import type { SecretKeys } from '../app/secrets';
import type { Db } from '../app/store/db';
import { findBotTokenForRemoval, removeSlackConnection } from './connection-lifecycle';
import { slackConnectionRemovedSignal } from './contract';
import { freshBotToken } from './tokens';
import { authRevoke } from './web-api';

export interface RemovalDeps {
  db: Db;
  secretKey: SecretKeys;
  ingress: IngressGateway;
  settings: { apiBaseUrl: string };
}

export type RemovalOutcome =
  | { ok: true; token: 'revoked' | 'gone' | 'none'; links: number; waiting: number }
  | { ok: false; reason: 'not_found' }
  | { ok: false; reason: 'slack_unavailable'; error: string };

export async function removeConnection(deps: RemovalDeps, organizationId: string, connectionId: string): Promise<RemovalOutcome> {
  const found = await findBotTokenForRemoval(deps, organizationId, connectionId);
  if (!found) return { ok: false, reason: 'not_found' };
  let token: 'revoked' | 'gone' | 'none' = 'none';
  if (found.botToken !== null) {
    const fresh = await freshBotToken({ ...deps, apiBaseUrl: deps.settings.apiBaseUrl }, connectionId);
    const revoked = await authRevoke(deps.settings.apiBaseUrl, fresh.ok ? fresh.token : found.botToken);
    if (!revoked.ok) return { ok: false, reason: 'slack_unavailable', error: revoked.error };
    token = revoked.outcome;
  }
  const removal = await removeSlackConnection(deps.db, { organizationId, connectionId }, async (workflowIds) => {
    for (const id of workflowIds) {
      await deps.ingress.signal({ id, signal: slackConnectionRemovedSignal, args: [{ reason: 'connection_deleted' }] });
    }
  });
  if (!removal) return { ok: false, reason: 'not_found' };
  return { ok: true, token, ...removal };
}
