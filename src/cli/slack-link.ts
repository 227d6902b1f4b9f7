/**
 * `den slack link <code>`: a member links their own Slack account, without a dashboard. The `/den`
 * reply (and the prompt an unlinked mention gets) shows the command with a one-time code; the
 * member runs it with their own API key, and the API (`POST /v1/integrations/slack/account-links`)
 * makes their Slack user theirs. A client of the API like `den runtime`, with the same settings
 * (DEN_API_URL, DEN_API_KEY: src/cli/runtime/settings.ts); it opens no database.
 */
import type { Command } from 'commander';
import { CliError, print } from '../app/cli';
import { retryAfterMs, sleepUnlessStopped } from './runtime/api-client';
import { loadRuntimeSettings } from './runtime/settings';

const TIMEOUT_MS = 30_000;
/** A 429 (the organization's share) is waited out this many times before giving up. */
const RATE_LIMIT_TRIES = 3;

/** What each refusal means to the member who typed the code. */
const REFUSALS: Record<string, string> = {
  link_not_found: 'this code is not one den gave out: check it, or type /den in Slack for a new one',
  invalid_link: "this code is for another Slack workspace's connection",
  link_expired: 'this code has expired: type /den in Slack for a new one',
  link_used: 'this code (or its link) was already used: type /den in Slack for a new one',
  already_linked: 'this Slack account is already linked to another den member',
  not_found: "this code's Slack connection is not one of your organization's (is DEN_API_KEY your organization's key?)",
};

async function postCode(apiUrl: string, apiKey: string, code: string): Promise<{ status: number; body: Record<string, unknown> }> {
  for (let tries = 1; ; tries++) {
    let response: Response;
    try {
      response = await fetch(`${apiUrl.replace(/\/+$/, '')}/v1/integrations/slack/account-links`, {
        method: 'POST',
        headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
        body: JSON.stringify({ code }),
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
    } catch (error) {
      throw new CliError(`cannot reach the API at ${apiUrl}: ${(error as Error).message}`);
    }
    if (response.status === 429 && tries < RATE_LIMIT_TRIES) {
      await response.body?.cancel();
      await sleepUnlessStopped(retryAfterMs(response.headers.get('retry-after')));
      continue;
    }
    const text = await response.text();
    let body: Record<string, unknown> = {};
    try {
      body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      body = { error: text.slice(0, 200) };
    }
    return { status: response.status, body };
  }
}

export function registerSlackLinkCommand(program: Command): void {
  const slack = program.commands.find((command) => command.name() === 'slack') ?? program.command('slack');
  slack
    .command('link <code>')
    .description(
      'Link your Slack account to your den member with the code the `/den` reply shows, using your own API key ' +
        '(DEN_API_KEY, or --api-key) against the API (DEN_API_URL, or --api-url). Requests waiting for the link run at once. ' +
        'Prints {connectionId, slackUserId, memberId}.',
    )
    .option('--api-url <url>', 'the API (default DEN_API_URL, else http://127.0.0.1:8080)')
    .option('--api-key <key>', 'your own API key (default DEN_API_KEY)')
    .action(async (code: string, options: { apiUrl?: string; apiKey?: string }) => {
      const settings = loadRuntimeSettings();
      const apiKey = options.apiKey ?? settings.apiKey;
      if (!apiKey) throw new CliError('no API key: pass --api-key or set DEN_API_KEY to your own den API key');
      const apiUrl = options.apiUrl ?? settings.apiUrl;
      const { status, body } = await postCode(apiUrl, apiKey, code);
      if (status === 201) return print(body);
      if (status === 401) throw new CliError(`the API at ${apiUrl} refused the API key (401): check DEN_API_KEY`);
      const error = typeof body.error === 'string' ? body.error : `http_${status}`;
      const detail =
        error === 'invalid_request' ? 'the code is malformed: it looks like ABCDE-FGHJK' : (REFUSALS[error] ?? JSON.stringify(body));
      throw new CliError(`link not completed: ${error} (${status}): ${detail}`);
    });
}
