/**
 * The target sync's test kit: a stack wired to the fake GitHub (test/harness/fake-github.ts)
 * with the App's credentials, a repository there with a target here, and signed pushes of its
 * commits sent over real HTTP, optionally logged on the fake as GitHub logs its deliveries.
 */
import { randomUUID } from 'node:crypto';
import { signGithubPayload } from '../../src/github/signature';
import type { Db } from '../../src/app/store/db';
import type { FakeGithub } from './fake-github';
import { deliver, freshId, githubExample, ownedTarget } from './github';
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

export interface SyncedRepo {
  installationId: number;
  repositoryId: number;
  fullName: string;
  targetId: string;
  /** Commits `files` on the fake as master's new head and delivers its push; returns the head. */
  push(files: Record<string, string>, deliveryId?: string): Promise<{ sha: string; response: TestResponse; deliveryId: string }>;
  /** Like push, sent to `to` and logged in the fake's delivery log with the status it got. */
  pushLogged(
    files: Record<string, string>,
    to: HttpTarget,
  ): Promise<{ sha: string; response: TestResponse; deliveryId: string; logId: number }>;
}

/** The fake's redeliveries go to `to`, with the logged GUID, body and signature. */
export function redeliverInto(fake: FakeGithub, to: () => HttpTarget): void {
  fake.redeliverTo = async (request) =>
    (await deliver(to(), { event: request.event, deliveryId: request.guid, raw: request.raw, signature: request.signature, secret: '' }))
      .status;
}

/** A repository on the fake GitHub with a target (on refs/heads/master) in `organizationId`, which owns its installation. */
export async function syncedRepo(
  db: Db,
  fake: FakeGithub,
  organizationId: string,
  stack: () => HttpTarget,
  secret: string,
): Promise<SyncedRepo> {
  const n = freshId();
  const repo = { installationId: freshId(), repositoryId: n, fullName: `octo-${n}/plugins-${n}` };
  const targetId = await ownedTarget(db, {
    organizationId,
    installationId: repo.installationId,
    repositoryFullName: repo.fullName,
    repositoryId: n,
    ref: 'master',
  });
  const pushOf = (files: Record<string, string>) => {
    const sha = fake.commit(repo.fullName, repo.installationId, 'master', files);
    const payload = githubExample('push', (p) => p.ref === 'refs/heads/master' && p.installation);
    payload.installation.id = repo.installationId;
    payload.repository.id = n;
    payload.repository.full_name = repo.fullName;
    payload.repository.name = repo.fullName.split('/')[1];
    payload.after = sha;
    return { sha, payload };
  };
  return {
    ...repo,
    targetId,
    async push(files, deliveryId = randomUUID()) {
      const { sha, payload } = pushOf(files);
      const response = await deliver(stack(), { event: 'push', deliveryId, payload, secret });
      return { sha, response, deliveryId };
    },
    async pushLogged(files, to) {
      const { sha, payload } = pushOf(files);
      const deliveryId = randomUUID();
      const raw = JSON.stringify(payload);
      const signature = signGithubPayload(secret, raw);
      const response = await deliver(to, { event: 'push', deliveryId, raw, signature, secret });
      const logId = fake.logDelivery({ event: 'push', guid: deliveryId, raw, signature }, response.status);
      return { sha, response, deliveryId, logId };
    },
  };
}
