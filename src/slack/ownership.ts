/**
 * Whose an Events API delivery is. In a channel shared with another organization (Slack Connect),
 * the envelope's `team_id` is the workspace that owns the channel, and the installation the event
 * is delivered for is in `authorizations[]`: its `team_id`, or, for an Enterprise Grid org-wide
 * install, its `enterprise_id` with `is_enterprise_install` (https://docs.slack.dev/changelog/2020-09-15-events-api-truncate-authed-users;
 * bolt-js issues 935 and 687). `app_rate_limited` carries no `authorizations`: its top-level
 * `team_id` is the workspace whose events Slack drops (https://docs.slack.dev/reference/events/app_rate_limited/).
 * Pure: no Koa, no I/O.
 */
import type { SlackEventOf } from './event-payloads';

/** One entry of an envelope's `authorizations`, the fields used. */
export interface EventAuthorization {
  teamId: string | null;
  enterpriseId: string | null;
  isEnterpriseInstall: boolean;
}

/** The connection an event is checked against. */
export interface OwningConnection {
  teamId: string;
  apiAppId: string | null;
  /** Set for an org-wide install: events of every workspace of the organization are its own. */
  enterpriseId: string | null;
}

/** The envelope's parts that say whose it is. */
export interface EnvelopeOwner {
  type: string;
  teamId: string | undefined;
  apiAppId: string | undefined;
  authorizations: EventAuthorization[] | undefined;
}

/**
 * Whether a delivery is this connection's: the app must be the connection's; then its top-level
 * `team_id` is the connection's workspace, or (except for `app_rate_limited`) an authorization
 * names the connection's workspace or, for an org-wide install, its organization.
 */
export function isConnectionsEvent(connection: OwningConnection, envelope: EnvelopeOwner): boolean {
  if (envelope.apiAppId === undefined || envelope.apiAppId !== connection.apiAppId) return false;
  if (envelope.teamId === connection.teamId) return true;
  if (envelope.type === 'app_rate_limited') return false;
  return (envelope.authorizations ?? []).some(
    (auth) =>
      auth.teamId === connection.teamId ||
      (connection.enterpriseId !== null && auth.isEnterpriseInstall && auth.enterpriseId === connection.enterpriseId),
  );
}

const textOrNull = (value: unknown): string | null => (typeof value === 'string' && value.length > 0 ? value : null);

/** An envelope's `authorizations`, the entries that are objects; undefined when it has none. */
export function parseAuthorizations(value: unknown): EventAuthorization[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value
    .filter((entry): entry is Record<string, unknown> => typeof entry === 'object' && entry !== null && !Array.isArray(entry))
    .map((entry) => ({
      teamId: textOrNull(entry.team_id),
      enterpriseId: textOrNull(entry.enterprise_id),
      isEnterpriseInstall: entry.is_enterprise_install === true,
    }));
}

/**
 * The workspace of the user who wrote an event: `user_team`, else `team` (a partner workspace's
 * in a shared channel), else none (the connection's own).
 */
export function userTeamOf(event: Pick<SlackEventOf<'app_mention' | 'message'>, 'user_team' | 'team'>): string | null {
  return textOrNull(event.user_team) ?? textOrNull(event.team);
}
