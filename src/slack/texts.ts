/**
 * What the service says in Slack. Pure and free of Node imports: the slack-event workflow uses
 * it too. Slack mrkdwn: `<url|label>` is a link; `&`, `<` and `>` in text must be escaped.
 */
import type { RunSummary } from '../runs/contract';

/** https://api.slack.com/reference/surfaces/formatting#escaping */
export function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export function connectLinkUrl(baseUrl: string, token: string): string {
  return `${baseUrl.replace(/\/+$/, '')}/connect/slack?token=${encodeURIComponent(token)}`;
}

export function connectAccountText(url: string, ttlMs: number): string {
  const minutes = Math.max(1, Math.round(ttlMs / 60_000));
  return (
    `To use den from Slack, connect your Slack account to your den member: <${url}|Connect your account>. ` +
    `The link works once and expires in ${minutes} minute${minutes === 1 ? '' : 's'}.`
  );
}

export function heldInvocationText(url: string, ttlMs: number, waitMs: number): string {
  const minutes = Math.max(1, Math.round(waitMs / 60_000));
  return `${connectAccountText(url, ttlMs)} Your request is held for ${minutes} minute${minutes === 1 ? '' : 's'} and runs as soon as you connect.`;
}

export const DISABLED_CONNECTION_TEXT =
  'den is disabled for this workspace, so accounts cannot be connected right now. Ask a den administrator to enable it.';

export function limitText(limit: 'daily' | 'concurrent', max: number): string {
  return limit === 'daily'
    ? `You have reached your limit of ${max} den requests from Slack in the last 24 hours. Try again later.`
    : `You already have ${max} den request${max === 1 ? '' : 's'} running. Try again when one has finished.`;
}

/** The thread reply when the run ends: its last assistant text, or why there is none. */
export function runReplyText(summary: Pick<RunSummary, 'status' | 'error' | 'lastAssistantText'>): string {
  const text = summary.lastAssistantText?.trim();
  if (summary.status === 'succeeded') return text ? summary.lastAssistantText! : 'The run finished without a reply.';
  const why = summary.error ? ` (${escapeMrkdwn(summary.error)})` : '';
  switch (summary.status) {
    case 'skipped':
      return `No runtime picked up this request in time${why}. Make sure your den runtime is running, then ask again.`;
    case 'cancelled':
      return `The run was cancelled${why}.`;
    case 'timed_out':
      return `The run took too long and was stopped${why}.`;
    default:
      return `The run failed${why}.${text ? `\n\n${summary.lastAssistantText}` : ''}`;
  }
}
