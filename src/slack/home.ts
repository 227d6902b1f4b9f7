/**
 * The app's Home tab for one member (https://docs.slack.dev/surfaces/app-home), as Block Kit:
 * whether their Slack account is linked (and how to link it), whether a runtime of theirs is
 * online (or when one was last seen), and their last runs with their status and a link to each
 * thread. Pure: the activity (activities/slack-conversation.ts) gathers the facts, and the docs
 * show what this returns.
 */
import { escapeMrkdwn } from './texts';
import { humanDuration } from './runtime-texts';

/** Slack takes at most 100 blocks in a Home tab view. */
export const HOME_BLOCK_LIMIT = 100;
/** The runs the Home tab lists, newest first. */
export const HOME_RUNS = 5;

export interface HomeRun {
  runId: string;
  status: string;
  createdAt: number;
  /** What was asked, as the run's input holds it. */
  text: string | null;
  /** A link to the thread it was asked in, when Slack gave one. */
  permalink: string | null;
}

export interface HomeFacts {
  /** The linked member, or how to link. */
  link: { linked: true; memberId: string } | { linked: false; code: string; ttlMs: number; url?: string };
  runtime: { online: boolean; lastSeenAt: number | null };
  runs: HomeRun[];
  now: number;
}

const mrkdwn = (text: string) => ({ type: 'mrkdwn', text, verbatim: true });
const section = (text: string) => ({ type: 'section', text: mrkdwn(text) });

const STATUS_MARK: Record<string, string> = {
  queued: ':hourglass_flowing_sand:',
  running: ':arrows_counterclockwise:',
  awaiting_retry: ':arrows_counterclockwise:',
  succeeded: ':white_check_mark:',
  failed: ':x:',
  cancelled: ':no_entry_sign:',
  timed_out: ':alarm_clock:',
  skipped: ':zzz:',
};

function linkBlocks(link: HomeFacts['link']): Record<string, unknown>[] {
  if (link.linked) return [section(':link: *Your Slack account is linked* to your den member. Mention me or send me a message to ask.')];
  const minutes = Math.max(1, Math.round(link.ttlMs / 60_000));
  const how = link.url === undefined ? 'Run' : `<${link.url}|Connect your account>, or run`;
  return [
    section(':warning: *Your Slack account is not linked to den yet*, so den cannot run anything you ask here.'),
    section(
      `${how} \`npx den slack link ${escapeMrkdwn(link.code)}\` with your own den API key in \`DEN_API_KEY\`. ` +
        `The code works once and expires in ${minutes} minute${minutes === 1 ? '' : 's'}; open this tab again for a new one.`,
    ),
  ];
}

function runtimeBlocks(runtime: HomeFacts['runtime'], now: number): Record<string, unknown>[] {
  if (runtime.online) return [section(':large_green_circle: *Your den runtime is online*: it picks up what you ask.')];
  const seen =
    runtime.lastSeenAt === null
      ? 'No runtime of yours has been seen yet.'
      : `One was last seen ${humanDuration(now - runtime.lastSeenAt)} ago.`;
  return [
    section(
      `:red_circle: *No den runtime of yours is online.* ${seen} Start one with \`npx den runtime --exec "<your agent command>"\`; ` +
        'requests wait for it for a while.',
    ),
  ];
}

function runBlocks(runs: HomeRun[], now: number): Record<string, unknown>[] {
  if (runs.length === 0) return [section('_You have not asked den anything yet._')];
  return runs.slice(0, HOME_RUNS).map((run) => {
    const asked = run.text ? `“${escapeMrkdwn(run.text.replace(/\s+/g, ' ').slice(0, 120))}”` : `\`${escapeMrkdwn(run.runId)}\``;
    const where = run.permalink ? ` · <${run.permalink}|open the thread>` : '';
    const mark = STATUS_MARK[run.status] ?? ':grey_question:';
    return {
      type: 'context',
      elements: [mrkdwn(`${mark} *${escapeMrkdwn(run.status)}* · ${asked} · ${humanDuration(now - run.createdAt)} ago${where}`)],
    };
  });
}

/** The Home tab view for `views.publish`. */
export function homeView(facts: HomeFacts): { type: 'home'; blocks: Record<string, unknown>[] } {
  const blocks = [
    { type: 'header', text: { type: 'plain_text', text: 'den' } },
    ...linkBlocks(facts.link),
    { type: 'divider' },
    ...runtimeBlocks(facts.runtime, facts.now),
    { type: 'divider' },
    { type: 'section', text: mrkdwn('*Your last requests*') },
    ...runBlocks(facts.runs, facts.now),
  ];
  return { type: 'home', blocks: blocks.slice(0, HOME_BLOCK_LIMIT) };
}
