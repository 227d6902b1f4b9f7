/**
 * What the runtime calls the API with: a runner token of its own, never its member's API key. At
 * start it mints one with the API key (or renews a token it was given, to learn when that one
 * expires), then keeps only the token, and renews it at half its life (`POST
 * /v1/automation-runners/token` with the token itself: same runner, new token). Neither the key
 * nor a token is ever logged.
 */
import fs from 'node:fs';
import path from 'node:path';
import { RuntimeError, sleepUnlessStopped, tokenRefusal } from './api-client';

export interface TokenGrant {
  token: string;
  runnerId: string;
  /** ms since the epoch. */
  expiresAt: number;
}

/** Sent with every call, so the runners list shows which release of the runtime this is. */
const VERSION_HEADER = 'x-den-runtime-version';

/** `den-runtime/<version>`, the version of the package it ships in. */
function runtimeVersion(): string {
  for (let dir = __dirname, depth = 0; depth < 6; dir = path.dirname(dir), depth++) {
    try {
      const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (manifest.name === 'den-control-plane-ingress' && manifest.version) return `den-runtime/${manifest.version}`;
    } catch {
      // No package.json here: look further up.
    }
  }
  return 'den-runtime';
}

/** The longest wait between two tries of a failed renewal. */
const RENEW_RETRY_MAX_MS = 30_000;

/** One call to the token route; `credential` is the API key (`x-api-key`) or a runner token (Bearer). */
async function tokenCall(
  apiUrl: string,
  credential: { apiKey: string } | { token: string },
  label: string | undefined,
): Promise<{ status: number; json?: Record<string, unknown> }> {
  const headers: Record<string, string> = { 'content-type': 'application/json', [VERSION_HEADER]: runtimeVersion() };
  if ('apiKey' in credential) headers['x-api-key'] = credential.apiKey;
  else headers.authorization = `Bearer ${credential.token}`;
  const response = await fetch(`${apiUrl.replace(/\/+$/, '')}/v1/automation-runners/token`, {
    method: 'POST',
    headers,
    body: JSON.stringify(label === undefined ? {} : { label }),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await response.text();
  let json: Record<string, unknown> | undefined;
  try {
    json = text ? (JSON.parse(text) as Record<string, unknown>) : undefined;
  } catch {
    json = undefined;
  }
  return { status: response.status, json };
}

function grantOf(answer: { status: number; json?: Record<string, unknown> }, what: string): TokenGrant {
  const { token, runnerId, expiresAt } = answer.json ?? {};
  if (answer.status !== 201 || typeof token !== 'string' || typeof runnerId !== 'string' || typeof expiresAt !== 'number') {
    throw new Error(`${what} answered ${answer.status}`);
  }
  return { token, runnerId, expiresAt };
}

/**
 * The runtime's first token: minted with the API key (which the caller then drops), or a renewal
 * of the token it was started with. A refused credential is a RuntimeError, with the API's reason.
 */
export async function firstToken(
  apiUrl: string,
  credential: { apiKey: string } | { token: string },
  label: string | undefined,
): Promise<TokenGrant> {
  const answer = await tokenCall(apiUrl, credential, 'apiKey' in credential ? label : undefined);
  if (answer.status === 401 && 'apiKey' in credential) {
    throw new RuntimeError(`the API at ${apiUrl} refused the API key (401): check DEN_API_KEY`);
  }
  if (answer.status === 401) throw new RuntimeError(`the API at ${apiUrl} refused the runner token (401 ${tokenRefusal(answer.json)})`);
  return grantOf(answer, 'minting a runner token');
}

/** Where a credential is renewed, where it tells what happened, and its clock (Date.now unless given). */
export interface RenewalOptions {
  apiUrl: string;
  log: (line: string) => void;
  now?: () => number;
}

/** The token the runtime holds now, renewed in the background at half its life until `stop`. */
export class RunnerCredential {
  private grant: TokenGrant;
  private renewing: Promise<void> | undefined;
  private readonly apiUrl: string;
  private readonly log: (line: string) => void;
  private readonly now: () => number;

  constructor(first: TokenGrant, { apiUrl, log, now = Date.now }: RenewalOptions) {
    this.grant = first;
    this.apiUrl = apiUrl;
    this.log = log;
    this.now = now;
  }

  get runnerId(): string {
    return this.grant.runnerId;
  }

  /** The headers every call carries: the token, and the runtime's version. */
  headers(): Record<string, string> {
    return { authorization: `Bearer ${this.grant.token}`, [VERSION_HEADER]: runtimeVersion() };
  }

  /** Renews the token at half its remaining life, again and again, until `stop` is aborted. */
  keepRenewed(stop: AbortSignal): void {
    this.renewing ??= this.renewLoop(stop).catch((error: unknown) => this.log(`token renewal stopped (${(error as Error).message})`));
  }

  private async renewLoop(stop: AbortSignal): Promise<void> {
    while (!stop.aborted) {
      await sleepUnlessStopped(Math.max(0, (this.grant.expiresAt - this.now()) / 2), stop);
      if (stop.aborted) return;
      await this.renewOnce(stop);
    }
  }

  /** One renewal, retried until it works or the token expires; a refusal (401) ends the renewals. */
  private async renewOnce(stop: AbortSignal): Promise<void> {
    for (let delay = 1_000; !stop.aborted; delay = Math.min(RENEW_RETRY_MAX_MS, delay * 2)) {
      let answer;
      try {
        answer = await tokenCall(this.apiUrl, { token: this.grant.token }, undefined);
      } catch (error) {
        answer = { status: 0, json: { message: (error as Error).message } };
      }
      if (answer.status === 401) throw new Error(`the API refused the runner token (${tokenRefusal(answer.json)})`);
      if (answer.status === 201) {
        this.grant = grantOf(answer, 'renewing the runner token');
        this.log(`renewed the runner token of runner ${this.grant.runnerId}`);
        return;
      }
      if (this.now() >= this.grant.expiresAt) throw new Error('the runner token expired before it could be renewed');
      this.log(`could not renew the runner token (${answer.status || String(answer.json?.message)}); retrying in ${delay} ms`);
      await sleepUnlessStopped(Math.min(delay, Math.max(0, this.grant.expiresAt - this.now())), stop);
    }
  }
}
