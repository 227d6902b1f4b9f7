/**
 * The target sync's test kit: a stack wired to the fake GitHub (test/harness/fake-github.ts)
 * with the App's credentials, a repository there with a target here, and signed pushes of its
 * commits sent over real HTTP (naming the repository's default branch, as GitHub's pushes do),
 * optionally logged on the fake as GitHub logs its deliveries.
 */
import { randomUUID } from 'node:crypto';
import { signGithubPayload } from '../../src/github/signature';
import type { Db } from '../../src/app/store/db';
import type { DeliveryAnswer, FakeGithub } from './fake-github';
import type { GitContent } from './fake-github-git';
import { sendHonouringRetryAfter } from './retry-after';
import { deliver, freshId, githubExample, ownedTarget, type Payload } from './github';
import type { HttpTarget, TestResponse } from './stack';

/** The service's settings for a fake GitHub: its URL, the App id and key, quick retries. */
export function fakeGithubEnv(fake: FakeGithub, secret: string): Record<string, string> {
  return {
    GITHUB_WEBHOOK_SECRET: secret,
    GITHUB_APP_ID: fake.appId,
    GITHUB_APP_PRIVATE_KEY: fake.privateKey,
    GITHUB_API_BASE_URL: fake.url,
    GITHUB_SYNC_RETRY_DELAY: '50ms',
    GITHUB_SYNC_MAX_ATTEMPTS: '4',
  };
}

/** How many times a push is sent when each is shed as overloaded (the first send included). */
const SHED_REDELIVERIES = 5;

const isShed = (response: TestResponse) => response.status === 503 && response.json?.error === 'overloaded';

export interface PushOptions {
  /** The branch the commit lands on (default: the target's, else master). */
  branch?: string;
  /** The push's `ref` when it is no branch (`refs/tags/v1`). */
  ref?: string;
  deliveryId?: string;
  /** The commit's parent (null: unrelated history, a force-push); default the branch's head. */
  parent?: string | null;
}

export interface SyncedRepo {
  installationId: number;
  repositoryId: number;
  fullName: string;
  targetId: string;
  /** Commits `files` on the fake as the branch's new head and delivers its push; returns the head. */
  push(
    files: Record<string, GitContent>,
    options?: PushOptions | string,
  ): Promise<{ sha: string; response: TestResponse; deliveryId: string }>;
  /** The signed push of a commit already on the fake (a late delivery, or one out of order). */
  deliverPush(sha: string, options?: PushOptions): Promise<{ response: TestResponse; deliveryId: string }>;
  /** Like push, sent to `to` and logged in the fake's delivery log with what it answered. */
  pushLogged(
    files: Record<string, GitContent>,
    to: HttpTarget,
  ): Promise<{ sha: string; response: TestResponse; deliveryId: string; logId: number }>;
}

/** What a delivery got from the service, as GitHub keeps it. */
const answerOf = (response: TestResponse): DeliveryAnswer => ({ status: response.status, body: response.text });

/** The fake's redeliveries go to `to`, with the logged GUID, body and signature. */
export function redeliverInto(fake: FakeGithub, to: () => HttpTarget): void {
  fake.redeliverTo = async (request) =>
    answerOf(
      await deliver(to(), { event: request.event, deliveryId: request.guid, raw: request.raw, signature: request.signature, secret: '' }),
    );
}

/**
 * A repository on the fake GitHub with a target in `organizationId`, which owns its installation:
 * on refs/heads/master unless `ref` says otherwise (null: a target without a ref, which follows the
 * default branch). `installationId` puts it beside another repository's installation.
 */
export async function syncedRepo(
  db: Db,
  fake: FakeGithub,
  organizationId: string,
  stack: () => HttpTarget,
  secret: string,
  options: { ref?: string | null; installationId?: number } = {},
): Promise<SyncedRepo> {
  const n = freshId();
  const repo = { installationId: options.installationId ?? freshId(), repositoryId: n, fullName: `octo-${n}/plugins-${n}` };
  const ref = options.ref === undefined ? 'master' : options.ref;
  fake.install(repo.installationId);
  const targetId = await ownedTarget(db, {
    organizationId,
    installationId: repo.installationId,
    repositoryFullName: repo.fullName,
    repositoryId: n,
    ...(ref === null ? {} : { ref }),
  });
  const branchOf = (o: PushOptions) => o.branch ?? (ref === null ? 'master' : ref.replace(/^refs\/heads\//, ''));
  const payloadOf = (sha: string, branch: string, fullRef = `refs/heads/${branch}`): Payload => {
    const payload = githubExample('push', (p) => p.ref === 'refs/heads/master' && p.installation);
    payload.installation.id = repo.installationId;
    payload.repository.id = n;
    payload.repository.full_name = repo.fullName;
    payload.repository.name = repo.fullName.split('/')[1];
    payload.repository.default_branch = fake.defaultBranch(repo.fullName);
    payload.repository.master_branch = payload.repository.default_branch;
    payload.ref = fullRef;
    payload.after = sha;
    return payload;
  };
  const send = async (sha: string, o: PushOptions) => {
    const deliveryId = o.deliveryId ?? randomUUID();
    const payload = payloadOf(sha, branchOf(o), o.ref);
    // A delivery shed by a saturated engine (503 overloaded: the whole suite shares two cores) is
    // one the service's reconcile asks GitHub to redeliver, under the same delivery id; the kit
    // redelivers it at once after its Retry-After, a few times at most.
    const response = await sendHonouringRetryAfter(
      () => deliver(stack(), { event: 'push', deliveryId, payload, secret }),
      isShed,
      SHED_REDELIVERIES,
    );
    return { response, deliveryId };
  };
  return {
    ...repo,
    targetId,
    async push(files, given = {}) {
      const o = typeof given === 'string' ? { deliveryId: given } : given;
      const sha = fake.commit(repo.fullName, repo.installationId, branchOf(o), files, o.parent);
      return { sha, ...(await send(sha, o)) };
    },
    deliverPush: (sha, o = {}) => send(sha, o),
    async pushLogged(files, to) {
      const sha = fake.commit(repo.fullName, repo.installationId, branchOf({}), files);
      const deliveryId = randomUUID();
      const raw = JSON.stringify(payloadOf(sha, branchOf({})));
      const signature = signGithubPayload(secret, raw);
      const response = await deliver(to, { event: 'push', deliveryId, raw, signature, secret });
      const logId = fake.logDelivery({ event: 'push', guid: deliveryId, raw, signature }, answerOf(response));
      return { sha, response, deliveryId, logId };
    },
  };
}
