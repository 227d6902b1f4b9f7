/**
 * The target sync's test kit: a stack wired to the fake GitHub (test/harness/fake-github.ts)
 * with the App's credentials, a repository there with a target here, and signed pushes of its
 * commits sent over real HTTP.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../../src/app/store/db';
import { createTarget } from '../../src/github/targets';
import type { FakeGithub } from './fake-github';
import { deliver, freshId, githubExample } from './github';
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
}

/** A repository on the fake GitHub with a target (on refs/heads/master) in `organizationId`. */
export async function syncedRepo(
  db: Db,
  fake: FakeGithub,
  organizationId: string,
  stack: () => HttpTarget,
  secret: string,
): Promise<SyncedRepo> {
  const n = freshId();
  const repo = { installationId: freshId(), repositoryId: n, fullName: `octo-${n}/plugins-${n}` };
  const created = await createTarget(db, {
    organizationId,
    installationId: repo.installationId,
    repositoryFullName: repo.fullName,
    repositoryId: n,
    ref: 'master',
  });
  return {
    ...repo,
    targetId: created!.targetId,
    async push(files, deliveryId = randomUUID()) {
      const sha = fake.commit(repo.fullName, repo.installationId, 'master', files);
      const payload = githubExample('push', (p) => p.ref === 'refs/heads/master' && p.installation);
      payload.installation.id = repo.installationId;
      payload.repository.id = n;
      payload.repository.full_name = repo.fullName;
      payload.repository.name = repo.fullName.split('/')[1];
      payload.after = sha;
      const response = await deliver(stack(), { event: 'push', deliveryId, payload, secret });
      return { sha, response, deliveryId };
    },
  };
}
