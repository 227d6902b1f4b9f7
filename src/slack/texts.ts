/**
 * What the service says in Slack. Pure and free of Node imports: the slack-event workflow uses
 * it too. Slack mrkdwn: `<url|label>` is a link; `&`, `<` and `>` in text must be escaped.
 */
import type { RunSummary } from '../runs/contract';

/**
 * Text as Slack shows it literally: no `<!channel>`, `<@U…>`, `<#C…>` or `<url|label>` in it is
 * acted on. Every text the service did not write goes through this, or through the Markdown
 * conversion (src/slack/mrkdwn.ts), which uses it for every piece of text.
 * https://api.slack.com/reference/surfaces/formatting#escaping
 */
export function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** The dashboard's page that completes a connect link (DASHBOARD_URL): it posts the token as the signed-in member. */
export function connectLinkUrl(dashboardUrl: string, token: string): string {
  return `${dashboardUrl.replace(/\/+$/, '')}/connect/slack?token=${encodeURIComponent(token)}`;
}

/** The ways a member can link: the dashboard's page when there is one, and always the code for `den slack link`. */
export interface ConnectOffer {
  /** The dashboard's connect page with the token; absent without DASHBOARD_URL, so no link leads nowhere. */
  url?: string;
  /** A link code (src/slack/link-codes.ts): only Crockford base32 and a dash, nothing Slack would read as markup. */
  code: string;
  ttlMs: number;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

export function connectAccountText(offer: ConnectOffer): string {
  const minutes = Math.max(1, Math.round(offer.ttlMs / 60_000));
  const command = `\`npx den slack link ${escapeMrkdwn(offer.code)}\``;
  const withKey = 'with your own den API key in `DEN_API_KEY`';
  if (offer.url === undefined) {
    return (
      `To use den from Slack, connect your Slack account to your den member: run ${command} ${withKey}. ` +
      `The code works once and expires in ${plural(minutes, 'minute')}.`
    );
  }
  return (
    `To use den from Slack, connect your Slack account to your den member: <${offer.url}|Connect your account>, ` +
    `or run ${command} ${withKey}. The link and the code work once (either one) and expire in ${plural(minutes, 'minute')}.`
  );
}

export function heldInvocationText(offer: ConnectOffer, waitMs: number): string {
  const minutes = Math.max(1, Math.round(waitMs / 60_000));
  return `${connectAccountText(offer)} Your request is held for ${plural(minutes, 'minute')} and runs as soon as you connect.`;
}

export const DISABLED_CONNECTION_TEXT =
  'den is disabled for this workspace, so accounts cannot be connected right now. Ask a den administrator to enable it.';

export function limitText(limit: 'daily' | 'concurrent', max: number): string {
  return limit === 'daily'
    ? `You have reached your limit of ${max} den requests from Slack in the last 24 hours. Try again later.`
    : `You already have ${max} den request${max === 1 ? '' : 's'} running. Try again when one has finished.`;
}

/**
 * The thread reply when the run ends, escaped: its last assistant text as it stands, or why there
 * is none. Where a succeeded run's answer is converted from Markdown instead (the message's final
 * edit), the workflow sends the Markdown itself.
 */
export function runReplyText(summary: Pick<RunSummary, 'status' | 'error' | 'lastAssistantText'>): string {
  const text = summary.lastAssistantText?.trim();
  if (summary.status === 'succeeded') return text ? escapeMrkdwn(summary.lastAssistantText!) : 'The run finished without a reply.';
  const why = summary.error ? ` (${escapeMrkdwn(summary.error)})` : '';
  switch (summary.status) {
    case 'skipped':
      return `No runtime picked up this request in time${why}. Make sure your den runtime is running, then ask again.`;
    case 'cancelled':
      return `The run was cancelled${why}.`;
    case 'timed_out':
      return `The run took too long and was stopped${why}.`;
    default:
      return `The run failed${why}.${text ? `\n\n${escapeMrkdwn(summary.lastAssistantText!)}` : ''}`;
  }
}

/** What a member is told, ephemerally, after asking to cancel a run from Slack. */
export function cancelOutcomeText(
  outcome: 'requested' | 'unconfirmed' | 'not_linked' | 'not_allowed' | 'closed' | 'no_active_run' | 'failed',
): string {
  switch (outcome) {
    case 'requested':
      return 'Cancelling the run. Its message says so once it has stopped.';
    case 'unconfirmed':
      return 'Asking the run to stop. Its message says so once it has stopped.';
    case 'not_linked':
      return 'Connect your Slack account to den first (type `/den`).';
    case 'not_allowed':
      return 'Only the member who asked, or an admin of the organization, can cancel this run.';
    case 'closed':
      return 'That run has already finished.';
    case 'no_active_run':
      return 'You have no den request running.';
    default:
      return 'den could not reach the run to cancel it. Try again in a moment.';
  }
}

/** A Slack id (C…, D…, G…): only such a channel becomes a `<#…>` link. */
const SLACK_ID = /^[A-Z0-9]+$/;

/** `/den status`: the caller's active runs, newest first, with their status, age and where they were asked. */
export function runStatusText(runs: { runId: string; status: string; startedAt: number; channel: string | null }[], now: number): string {
  if (runs.length === 0) return 'You have no den request running.';
  const lines = runs.map((run) => {
    const minutes = Math.max(0, Math.floor((now - run.startedAt) / 60_000));
    const age = minutes === 0 ? 'under a minute' : `${minutes} minute${minutes === 1 ? '' : 's'}`;
    const where = !run.channel ? '' : SLACK_ID.test(run.channel) ? ` in <#${run.channel}>` : ` in ${escapeMrkdwn(run.channel)}`;
    return `• \`${escapeMrkdwn(run.runId)}\`: ${escapeMrkdwn(run.status)}, asked ${age} ago${where}`;
  });
  return `Your den requests still running:\n${lines.join('\n')}`;
}

export const HELP_TEXT = [
  'den in Slack: mention the bot or send it a direct message, and your den runtime answers in the thread.',
  '• `/den`: connect your Slack account to your den member',
  '• `/den status`: your requests still running',
  '• `/den cancel`: stop your newest running request (or use its Cancel button)',
  '• `/den help`: this list',
].join('\n');
