/**
 * GitHub test helpers: real payloads from `@octokit/webhooks-examples`, signed for real, sent
 * over real HTTP, and bounded waits for the delivery workflow.
 */
import { randomInt, randomUUID } from 'node:crypto';
import type { Db } from '../../src/app/store/db';
import { signGithubPayload } from '../../src/github/signature';
import { bindInstallation } from '../../src/github/installations';
import { createTarget } from '../../src/github/target-records';
import { githubDeliveryWorkflowId, type GithubDeliverySummary } from '../../src/github/contract';
import type { HttpTarget, TestStack, TestResponse } from './stack';

// Payloads are mutated freely by tests (fresh ids per test), so they are typed loosely.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Payload = Record<string, any>;

interface ExampleGroup {
  name: string;
  actions: string[];
  examples: Payload[];
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const groups = require('@octokit/webhooks-examples/api.github.com/index.json') as ExampleGroup[];

/** A deep copy of the first example of `event` that satisfies `where` (e.g. an action). */
export function githubExample(event: string, where: (payload: Payload) => boolean = () => true): Payload {
  const group = groups.find((g) => g.name === event);
  if (!group) throw new Error(`no examples for ${event}`);
  const found = group.examples.find(where);
  if (!found) throw new Error(`no ${event} example matches`);
  return structuredClone(found);
}

/** Ids far from the examples' (1, 2, 186853002…) so tests never see each other's rows. */
export const freshId = () => randomInt(1_000_000_000, 2 ** 47);

/**
 * Binds the installation to the organization as an operator would (`den github installations
 * bind`), then connects the repository there (unverified: the first sync checks it); the target's id.
 */
export async function ownedTarget(db: Db, input: Parameters<typeof createTarget>[1]): Promise<string> {
  const bound = await bindInstallation(db, { installationId: input.installationId, organizationId: input.organizationId, via: 'operator' });
  if (bound.outcome !== 'bound' && bound.outcome !== 'already_bound') throw new Error(`installation not bound: ${bound.outcome}`);
  const created = await createTarget(db, input);
  if (!created.ok) throw new Error(`target not created: ${created.reason}`);
  return created.targetId;
}

/** GitHub's example branch push, moved onto a fresh installation and repository that `organizationId` owns and syncs. */
export async function pushWithTarget(db: Db, organizationId: string): Promise<Payload> {
  const payload = githubExample('push', (p) => p.ref === 'refs/heads/master' && p.installation);
  const n = freshId();
  payload.installation.id = freshId();
  payload.repository.id = n;
  payload.repository.full_name = `octo-${n}/hello-${n}`;
  payload.repository.name = `hello-${n}`;
  await ownedTarget(db, {
    organizationId,
    installationId: payload.installation.id,
    repositoryFullName: payload.repository.full_name,
    repositoryId: n,
  });
  return payload;
}

export interface DeliveryRequest {
  event?: string | null;
  deliveryId?: string | null;
  payload?: unknown;
  /** Sent as is instead of JSON.stringify(payload). */
  raw?: string | Buffer;
  secret: string;
  /** Overrides the computed header; null leaves it out. */
  signature?: string | null;
  path?: string;
  contentType?: string;
}

const GITHUB_PATH = '/v1/webhooks/connectors/github';
export const CODEHOST_PATH = '/v1/webhooks/connectors/codehost';

/** POSTs a delivery the way GitHub does: same headers, HMAC over the exact bytes sent. */
export async function deliver(stack: HttpTarget, request: DeliveryRequest): Promise<TestResponse> {
  const raw = request.raw ?? JSON.stringify(request.payload ?? {});
  const headers: Record<string, string> = {
    'content-type': request.contentType ?? 'application/json',
    'user-agent': 'GitHub-Hookshot/test',
  };
  if (request.event !== null) headers['x-github-event'] = request.event ?? 'ping';
  if (request.deliveryId !== null) headers['x-github-delivery'] = request.deliveryId ?? randomUUID();
  if (request.signature !== null) headers['x-hub-signature-256'] = request.signature ?? signGithubPayload(request.secret, raw);
  return stack.request('POST', request.path ?? GITHUB_PATH, { headers, raw });
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The delivery workflow's summary, once it has finished (bounded). */
export function deliveryResult(stack: TestStack, deliveryId: string, ms = 15_000): Promise<GithubDeliverySummary> {
  const handle = stack.services.temporal.client.workflow.getHandle(githubDeliveryWorkflowId(deliveryId));
  return withTimeout(handle.result() as Promise<GithubDeliverySummary>, ms, `github-delivery/${deliveryId}`);
}
