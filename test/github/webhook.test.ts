/**
 * POST /v1/webhooks/connectors/github (and its codehost alias) end to end: real HTTP, real
 * GitHub payloads signed for real, real Temporal worker, real Postgres.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { typeid } from 'typeid-js';
import { signGithubPayload } from '../../src/github/signature';
import { bindInstallation, installationOwner } from '../../src/github/installations';
import { getTarget } from '../../src/github/target-records';
import { githubDeliveryWorkflowId, githubSearchAttributes } from '../../src/github/contract';
import { CODEHOST_PATH, deliver, deliveryResult, freshId, githubExample, ownedTarget, type Payload } from '../harness/github';
import { createTestOrg } from '../harness/identity';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';
import { MAX_JSON_DEPTH } from '../../src/app/http/json-depth';

const SECRET = `current-${randomUUID()}`;
const PREVIOUS = `previous-${randomUUID()}`;

let stack: TestStack;
let org: Awaited<ReturnType<typeof createTestOrg>>;

beforeAll(async () => {
  stack = await startTestStack({ worker: true, env: { GITHUB_WEBHOOK_SECRET: SECRET, GITHUB_WEBHOOK_SECRET_PREVIOUS: PREVIOUS } });
  org = await createTestOrg(stack.services.database.db);
});
afterAll(() => stack.stop());

const db = () => stack.services.database.db;

/** A fresh repository identity, so no two tests share targets. */
function repo() {
  const n = freshId();
  return { installationId: freshId(), repositoryId: n, fullName: `octo-${n}/hello-${n}`, owner: `octo-${n}`, name: `hello-${n}` };
}
type Repo = ReturnType<typeof repo>;

/** The example branch push (refs/heads/master), moved onto `r`. */
function pushPayload(r: Repo): Payload {
  const payload = githubExample('push', (p) => p.ref === 'refs/heads/master' && p.installation);
  payload.installation.id = r.installationId;
  payload.repository.id = r.repositoryId;
  payload.repository.full_name = r.fullName;
  payload.repository.name = r.name;
  return payload;
}

/** A target of `org`, which owns the repository's installation. */
async function addTarget(r: Repo, extra: { ref?: string; withId?: boolean } = {}): Promise<string> {
  return ownedTarget(db(), {
    organizationId: org.organizationId,
    installationId: r.installationId,
    repositoryFullName: r.fullName,
    repositoryId: extra.withId === false ? undefined : r.repositoryId,
    ref: extra.ref,
  });
}

const syncRows = (deliveryId: string) =>
  db().selectFrom('github_sync_events').selectAll().where('delivery_id', '=', deliveryId).orderBy('target_id').execute();

const accepted = (event: string, deliveryId: string) => ({ ok: true, accepted: true, event, deliveryId, queued: true });
const notAccepted = (reason: string) => ({ ok: true, accepted: false, reason });

async function expectNoWorkflow(deliveryId: string): Promise<void> {
  const handle = stack.services.temporal.client.workflow.getHandle(githubDeliveryWorkflowId(deliveryId));
  await expect(handle.describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
}

describe('push', () => {
  it("queues one sync event per matching active target of the installation's owner, honouring the ref filter", async () => {
    const r = repo();
    const any = await addTarget(r);
    // Connected by name only (bare branch name).
    const nameOnly = await addTarget(r, { ref: 'master', withId: false });
    // Another organization's target on the same installation, as rows from before installations had owners could be.
    const otherOrg = await createTestOrg(db());
    const stranger = typeid('ght').toString();
    await db()
      .insertInto('github_connector_targets')
      .values({
        id: stranger,
        organization_id: otherOrg.organizationId,
        installation_id: r.installationId,
        repository_id: r.repositoryId,
        repository_full_name: r.fullName,
        ref: null,
        status: 'active',
      })
      .execute();
    await addTarget(r, { ref: 'refs/heads/other' });
    const disabled = await addTarget(r, { ref: 'refs/tags/v1' });
    await db().updateTable('github_connector_targets').set({ status: 'disabled', ref: null }).where('id', '=', disabled).execute();
    await addTarget({ ...r, installationId: freshId() });

    const payload = pushPayload(r);
    const deliveryId = randomUUID();
    const res = await deliver(stack, { event: 'push', deliveryId, payload, secret: SECRET });
    expect(res.status).toBe(202);
    expect(res.json).toEqual(accepted('push', deliveryId));

    const rows = await waitFor(async () => {
      const found = await syncRows(deliveryId);
      return found.length > 0 && found;
    });
    expect(rows.map((row) => row.target_id).sort()).toEqual([any, nameOnly].sort());
    for (const row of rows) {
      expect(row).toMatchObject({
        organization_id: org.organizationId,
        event: 'push',
        action: null,
        kind: 'push',
        installation_id: String(r.installationId),
        repository_id: String(r.repositoryId),
        repository_full_name: r.fullName,
        ref: 'refs/heads/master',
        head_sha: payload.after,
        status: 'queued',
        outcome: null,
      });
    }
    // A target created from the name alone learns the repository id from the push.
    expect((await getTarget(db(), nameOnly))?.repositoryId).toBe(r.repositoryId);

    const summary = await deliveryResult(stack, deliveryId);
    expect(summary).toMatchObject({ deliveryId, event: 'push', action: null, targetChanges: [], repositoriesRecorded: 0 });
    expect(summary.syncEvents).toHaveLength(2);
    expect(summary.syncEvents.every((e) => e.status === 'queued' && e.created)).toBe(true);

    // Operators can find the delivery by its search attributes.
    const description = await stack.services.temporal.client.workflow.getHandle(githubDeliveryWorkflowId(deliveryId)).describe();
    expect(description.typedSearchAttributes.get(githubSearchAttributes.GithubEvent)).toBe('push');
    expect(description.typedSearchAttributes.get(githubSearchAttributes.GithubDeliveryId)).toBe(deliveryId);
    expect(description.typedSearchAttributes.get(githubSearchAttributes.GithubRepository)).toBe(r.fullName);
  });

  it('records a repeated push to the same head once per target', async () => {
    const r = repo();
    const targetId = await addTarget(r);
    const payload = pushPayload(r);
    const first = randomUUID();
    expect((await deliver(stack, { event: 'push', deliveryId: first, payload, secret: SECRET })).status).toBe(202);
    await deliveryResult(stack, first);
    // Another push to the same head (a force-push back to it): another body, so not a replay.
    const second = randomUUID();
    const res = await deliver(stack, {
      event: 'push',
      deliveryId: second,
      payload: { ...payload, before: 'c'.repeat(40) },
      secret: SECRET,
    });
    expect(res.json).toEqual(accepted('push', second));
    const summary = await deliveryResult(stack, second);
    expect(summary.syncEvents).toEqual([expect.objectContaining({ targetId, created: false, status: 'queued' })]);
    const rows = await db().selectFrom('github_sync_events').select('delivery_id').where('target_id', '=', targetId).execute();
    expect(rows).toEqual([{ delivery_id: first }]);
  });

  it('with no active target for the repository → 200 not accepted `no matching target`, and nothing is started or recorded', async () => {
    const r = repo();
    const deliveryId = randomUUID();
    const res = await deliver(stack, { event: 'push', deliveryId, payload: pushPayload(r), secret: SECRET });
    expect(res.status).toBe(200);
    expect(res.json).toEqual(notAccepted('no matching target'));
    await expectNoWorkflow(deliveryId);
    expect(await syncRows(deliveryId)).toEqual([]);
    // A target only on another ref, or a disabled one, takes nothing either.
    await addTarget(r, { ref: 'refs/heads/other' });
    const disabled = await addTarget(r);
    await db().updateTable('github_connector_targets').set({ status: 'disabled' }).where('id', '=', disabled).execute();
    const again = await deliver(stack, { event: 'push', payload: pushPayload(r), secret: SECRET });
    expect([again.status, again.json]).toEqual([200, notAccepted('no matching target')]);
  });

  it('a target created or enabled on one replica is seen at once by another (Postgres LISTEN/NOTIFY), not after its cache expires', async () => {
    // A second API replica on the same database and Temporal.
    const replica = await startTestStack({ env: { GITHUB_WEBHOOK_SECRET: SECRET, TEMPORAL_TASK_QUEUE: stack.config.temporal.taskQueue } });
    try {
      const r = repo();
      // Until the replica listens on the channel, it cannot vouch for "no target" and accepts (durably).
      const first = await waitFor(
        async () => {
          const res = await deliver(replica, {
            event: 'push',
            payload: { ...pushPayload(r), after: randomUUID().replace(/-/g, '').padEnd(40, '0') },
            secret: SECRET,
          });
          return res.status === 200 && res;
        },
        5_000,
        { what: 'the replica to listen', intervalMs: 50 },
      );
      expect(first.json).toEqual(notAccepted('no matching target'));
      // Created through the other replica's route: the replica answered from its cache a moment ago.
      await bindInstallation(db(), { installationId: r.installationId, organizationId: org.organizationId, via: 'operator' });
      const created = await stack.request('POST', '/v1/connectors/github/targets', {
        headers: org.owner.headers,
        body: { installationId: r.installationId, repository: r.fullName },
      });
      expect(created.status).toBe(201);
      const deliveryId = randomUUID();
      const next = await waitFor(
        async () => {
          const res = await deliver(replica, {
            event: 'push',
            deliveryId,
            payload: { ...pushPayload(r), after: 'd'.repeat(40) },
            secret: SECRET,
          });
          return res.status === 202 && res;
        },
        5_000,
        { what: 'the replica to see the new target', intervalMs: 100 },
      );
      expect(next.json).toEqual(accepted('push', deliveryId));
      // Disabled on one replica: the other answers `no matching target` again.
      await db().updateTable('github_connector_targets').set({ status: 'disabled' }).where('id', '=', created.json.targetId).execute();
      await waitFor(
        async () =>
          (await deliver(replica, { event: 'push', payload: { ...pushPayload(r), after: 'e'.repeat(40) }, secret: SECRET })).status === 200,
        5_000,
        { what: 'the replica to see the target disabled', intervalMs: 100 },
      );
    } finally {
      await replica.stop();
    }
  });

  it('ignores a branch deletion and a push without installation, with stable reasons and no workflow', async () => {
    const deletion = githubExample('push', (p) => p.deleted === true && p.installation);
    const deletionId = randomUUID();
    const res = await deliver(stack, { event: 'push', deliveryId: deletionId, payload: deletion, secret: SECRET });
    expect(res.status).toBe(200);
    expect(res.json).toEqual(notAccepted('ref deleted'));

    const noInstallation = githubExample('push', (p) => !p.installation && p.deleted === false);
    const noInstallationId = randomUUID();
    const res2 = await deliver(stack, { event: 'push', deliveryId: noInstallationId, payload: noInstallation, secret: SECRET });
    expect(res2.status).toBe(200);
    expect(res2.json).toEqual(notAccepted('missing installation id'));

    const noRepository = pushPayload(repo());
    delete noRepository.repository.id;
    const res3 = await deliver(stack, { event: 'push', payload: noRepository, secret: SECRET });
    expect(res3.json).toEqual(notAccepted('missing repository'));

    await expectNoWorkflow(deletionId);
    await expectNoWorkflow(noInstallationId);
  });

  it('accepts GitHub form-encoded deliveries (payload=…) signed over the form bytes', async () => {
    const r = repo();
    const targetId = await addTarget(r);
    const deliveryId = randomUUID();
    const raw = `payload=${encodeURIComponent(JSON.stringify(pushPayload(r)))}`;
    const res = await deliver(stack, { event: 'push', deliveryId, raw, contentType: 'application/x-www-form-urlencoded', secret: SECRET });
    expect(res.status).toBe(202);
    expect(res.json).toEqual(accepted('push', deliveryId));
    const rows = await waitFor(async () => {
      const found = await syncRows(deliveryId);
      return found.length > 0 && found;
    });
    expect(rows.map((row) => row.target_id)).toEqual([targetId]);
  });
});

describe('installation and repository lifecycle', () => {
  it('installation.deleted disconnects every target of the installation and removes its binding', async () => {
    const r = repo();
    const active = await addTarget(r);
    const disabled = await addTarget(r, { ref: 'refs/heads/dev' });
    await db().updateTable('github_connector_targets').set({ status: 'disabled' }).where('id', '=', disabled).execute();
    const otherRepo = repo();
    const other = await addTarget(otherRepo);
    expect(await installationOwner(db(), r.installationId)).toBe(org.organizationId);

    const payload = githubExample('installation', (p) => p.action === 'deleted');
    payload.installation.id = r.installationId;
    const deliveryId = randomUUID();
    const res = await deliver(stack, { event: 'installation', deliveryId, payload, secret: SECRET });
    expect(res.status).toBe(202);
    expect(res.json).toEqual(accepted('installation', deliveryId));

    await waitFor(async () => (await getTarget(db(), active))?.status === 'disconnected');
    expect(await getTarget(db(), active)).toMatchObject({ status: 'disconnected', statusReason: 'installation_deleted' });
    expect(await getTarget(db(), disabled)).toMatchObject({ status: 'disconnected' });
    expect(await getTarget(db(), other)).toMatchObject({ status: 'active' });
    expect(await installationOwner(db(), r.installationId)).toBeUndefined();
    expect(await installationOwner(db(), otherRepo.installationId)).toBe(org.organizationId);
    const summary = await deliveryResult(stack, deliveryId);
    expect(summary.targetChanges).toEqual(
      expect.arrayContaining([
        { targetId: active, field: 'status', from: 'active', to: 'disconnected' },
        { targetId: disabled, field: 'status', from: 'disabled', to: 'disconnected' },
      ]),
    );
  });

  it('installation suspend disables and unsuspend re-enables only what the suspension disabled', async () => {
    const r = repo();
    const live = await addTarget(r);
    const gone = await addTarget(r, { ref: 'refs/heads/dev' });
    await db()
      .updateTable('github_connector_targets')
      .set({ status: 'disabled', status_reason: 'repository_deleted' })
      .where('id', '=', gone)
      .execute();

    for (const action of ['suspend', 'unsuspend'] as const) {
      const payload = githubExample('installation', (p) => p.action === action);
      payload.installation.id = r.installationId;
      const deliveryId = randomUUID();
      expect((await deliver(stack, { event: 'installation', deliveryId, payload, secret: SECRET })).json).toEqual(
        accepted('installation', deliveryId),
      );
      await deliveryResult(stack, deliveryId);
      if (action === 'suspend') {
        expect(await getTarget(db(), live)).toMatchObject({ status: 'disabled', statusReason: 'installation_suspended' });
      }
    }
    expect(await getTarget(db(), live)).toMatchObject({ status: 'active', statusReason: null });
    expect(await getTarget(db(), gone)).toMatchObject({ status: 'disabled', statusReason: 'repository_deleted' });
  });

  it('installation_repositories.removed disables the targets; added records availability without creating targets', async () => {
    const r = repo();
    const targetId = await addTarget(r);
    const removed = githubExample('installation_repositories', (p) => p.action === 'removed');
    removed.installation.id = r.installationId;
    removed.repositories_removed[0].id = r.repositoryId;
    removed.repositories_removed[0].full_name = r.fullName;
    const deliveryId = randomUUID();
    const res = await deliver(stack, { event: 'installation_repositories', deliveryId, payload: removed, secret: SECRET });
    expect(res.status).toBe(202);
    expect(res.json).toEqual(accepted('installation_repositories', deliveryId));
    await waitFor(async () => (await getTarget(db(), targetId))?.status === 'disabled');
    expect(await getTarget(db(), targetId)).toMatchObject({ status: 'disabled', statusReason: 'repository_removed' });
    const availability = () =>
      db().selectFrom('github_installation_repositories').selectAll().where('installation_id', '=', String(r.installationId)).execute();
    expect(await availability()).toEqual([expect.objectContaining({ repository_id: String(r.repositoryId), status: 'removed' })]);

    const added = githubExample('installation_repositories', (p) => p.action === 'added');
    added.installation.id = r.installationId;
    const newcomer = freshId();
    added.repositories_added = [
      { ...added.repositories_added[0], id: r.repositoryId, full_name: r.fullName },
      { ...added.repositories_added[0], id: newcomer, full_name: `${r.owner}/newcomer` },
    ];
    const addedId = randomUUID();
    expect(
      (await deliver(stack, { event: 'installation_repositories', deliveryId: addedId, payload: added, secret: SECRET })).json,
    ).toEqual(accepted('installation_repositories', addedId));
    const summary = await deliveryResult(stack, addedId);
    expect(summary.repositoriesRecorded).toBe(2);
    // The target that came back gets a full resync at once: its pushes were not delivered meanwhile.
    expect(summary.syncEvents).toEqual([expect.objectContaining({ targetId, status: 'queued', created: true })]);
    expect(await syncRows(addedId)).toEqual([expect.objectContaining({ target_id: targetId, kind: 'full_resync', action: 'added' })]);
    expect((await availability()).map((row) => [row.repository_id, row.status]).sort()).toEqual(
      [
        [String(r.repositoryId), 'available'],
        [String(newcomer), 'available'],
      ].sort(),
    );
    const targets = await db()
      .selectFrom('github_connector_targets')
      .select('id')
      .where('installation_id', '=', String(r.installationId))
      .execute();
    expect(targets).toEqual([{ id: targetId }]);
    expect(await getTarget(db(), targetId)).toMatchObject({ status: 'active' });
  });

  it('repository.renamed updates the name (by id, or by old name) and queues a full resync', async () => {
    const r = repo();
    const oldName = `${r.owner}/old-${r.repositoryId}`;
    const byId = await addTarget({ ...r, fullName: oldName });
    const byName = await addTarget({ ...r, fullName: oldName }, { withId: false, ref: 'refs/heads/main' });

    const payload = githubExample('repository', (p) => p.action === 'renamed');
    payload.installation.id = r.installationId;
    payload.repository.id = r.repositoryId;
    payload.repository.full_name = r.fullName;
    payload.repository.name = r.name;
    payload.changes.repository.name.from = `old-${r.repositoryId}`;
    const deliveryId = randomUUID();
    const res = await deliver(stack, { event: 'repository', deliveryId, payload, secret: SECRET });
    expect(res.status).toBe(202);
    expect(res.json).toEqual(accepted('repository', deliveryId));

    const rows = await waitFor(async () => {
      const found = await syncRows(deliveryId);
      return found.length > 0 && found;
    });
    expect(rows.map((row) => row.target_id).sort()).toEqual([byId, byName].sort());
    for (const row of rows) {
      expect(row).toMatchObject({
        event: 'repository',
        action: 'renamed',
        kind: 'full_resync',
        status: 'queued',
        head_sha: null,
        repository_full_name: r.fullName,
      });
    }
    expect(await getTarget(db(), byId)).toMatchObject({ repository: r.fullName, repositoryId: r.repositoryId, status: 'active' });
    expect(await getTarget(db(), byName)).toMatchObject({ repository: r.fullName, repositoryId: r.repositoryId, ref: 'refs/heads/main' });
    const summary = await deliveryResult(stack, deliveryId);
    expect(summary.targetChanges).toEqual(
      expect.arrayContaining([{ targetId: byId, field: 'repositoryFullName', from: oldName, to: r.fullName }]),
    );
  });

  it('a rename, deletion or transfer of a repository no target follows, and repositories added or removed that none follows → 200 `no matching target`, no workflow, the repositories still recorded', async () => {
    const r = repo();
    // A target of the same installation on another repository: the installation is followed, these repositories are not.
    const other = repo();
    await addTarget({ ...other, installationId: r.installationId });
    for (const action of ['renamed', 'deleted', 'transferred'] as const) {
      const payload = githubExample('repository', (p) => p.action === 'renamed');
      payload.action = action;
      payload.installation.id = r.installationId;
      payload.repository.id = r.repositoryId;
      payload.repository.full_name = r.fullName;
      const deliveryId = randomUUID();
      const res = await deliver(stack, { event: 'repository', deliveryId, payload, secret: SECRET });
      expect([res.status, res.json]).toEqual([200, notAccepted('no matching target')]);
      await expectNoWorkflow(deliveryId);
    }
    const availability = () =>
      db().selectFrom('github_installation_repositories').selectAll().where('installation_id', '=', String(r.installationId)).execute();
    for (const action of ['added', 'removed'] as const) {
      const payload = githubExample('installation_repositories', (p) => p.action === action);
      payload.installation.id = r.installationId;
      const list = action === 'added' ? 'repositories_added' : 'repositories_removed';
      payload[list] = [{ ...payload[list][0], id: r.repositoryId, full_name: r.fullName }];
      const deliveryId = randomUUID();
      const res = await deliver(stack, { event: 'installation_repositories', deliveryId, payload, secret: SECRET });
      expect([res.status, res.json]).toEqual([200, notAccepted('no matching target')]);
      await expectNoWorkflow(deliveryId);
      expect(await availability()).toEqual([
        expect.objectContaining({
          repository_id: String(r.repositoryId),
          status: action === 'added' ? 'available' : 'removed',
          delivery_id: deliveryId,
        }),
      ]);
    }
    // The same rename for a repository a target follows by its old name only is accepted.
    const tracked = repo();
    await addTarget({ ...tracked, fullName: `${tracked.owner}/old-${tracked.repositoryId}` }, { withId: false });
    const payload = githubExample('repository', (p) => p.action === 'renamed');
    payload.installation.id = tracked.installationId;
    payload.repository.id = tracked.repositoryId;
    payload.repository.full_name = tracked.fullName;
    payload.changes.repository.name.from = `old-${tracked.repositoryId}`;
    const deliveryId = randomUUID();
    const res = await deliver(stack, { event: 'repository', deliveryId, payload, secret: SECRET });
    expect(res.json).toEqual(accepted('repository', deliveryId));
  });

  it('repository.transferred and repository.deleted disable the target', async () => {
    for (const action of ['transferred', 'deleted'] as const) {
      const r = repo();
      const targetId = await addTarget(r);
      const payload = githubExample('repository', (p) => p.action === 'transferred' && p.installation);
      payload.action = action;
      if (action === 'deleted') delete payload.changes;
      payload.installation.id = r.installationId;
      payload.repository.id = r.repositoryId;
      payload.repository.full_name = r.fullName;
      const deliveryId = randomUUID();
      expect((await deliver(stack, { event: 'repository', deliveryId, payload, secret: SECRET })).json).toEqual(
        accepted('repository', deliveryId),
      );
      await deliveryResult(stack, deliveryId);
      expect(await getTarget(db(), targetId)).toMatchObject({ status: 'disabled', statusReason: `repository_${action}` });
    }
  });
});

describe('not accepted', () => {
  it('ping → 200 ping', async () => {
    const deliveryId = randomUUID();
    const res = await deliver(stack, { event: 'ping', deliveryId, payload: githubExample('ping'), secret: SECRET });
    expect(res.status).toBe(200);
    expect(res.json).toEqual(notAccepted('ping'));
    await expectNoWorkflow(deliveryId);
  });

  it('an irrelevant event (issues.opened) → 200 event ignored; an irrelevant action → action ignored', async () => {
    const deliveryId = randomUUID();
    const res = await deliver(stack, {
      event: 'issues',
      deliveryId,
      payload: githubExample('issues', (p) => p.action === 'opened'),
      secret: SECRET,
    });
    expect(res.status).toBe(200);
    expect(res.json).toEqual(notAccepted('event ignored'));
    await expectNoWorkflow(deliveryId);

    const created = githubExample('installation', (p) => p.action === 'created');
    const res2 = await deliver(stack, { event: 'installation', payload: created, secret: SECRET });
    expect(res2.status).toBe(200);
    expect(res2.json).toEqual(notAccepted('action ignored'));
  });

  it('missing X-GitHub-Event or X-GitHub-Delivery → 200 with the header named', async () => {
    const payload = pushPayload(repo());
    const noEvent = await deliver(stack, { event: null, payload, secret: SECRET });
    expect(noEvent.status).toBe(200);
    expect(noEvent.json).toEqual(notAccepted('missing X-GitHub-Event header'));
    const noDelivery = await deliver(stack, { event: 'push', deliveryId: null, payload, secret: SECRET });
    expect(noDelivery.status).toBe(200);
    expect(noDelivery.json).toEqual(notAccepted('missing X-GitHub-Delivery header'));
  });
});

describe('signature and body', () => {
  it('a missing, wrong or tampered signature → 401 invalid signature, counted', async () => {
    const payload = pushPayload(repo());
    const raw = JSON.stringify(payload);
    const cases = [
      await deliver(stack, { event: 'push', raw, secret: SECRET, signature: null }),
      await deliver(stack, { event: 'push', raw, secret: 'not-the-secret' }),
      await deliver(stack, {
        event: 'push',
        raw: raw.replace('"master"', '"mastex"'),
        secret: SECRET,
        signature: signGithubPayload(SECRET, raw),
      }),
      await deliver(stack, { event: 'push', raw, secret: SECRET, signature: 'sha1=0123456789abcdef0123456789abcdef01234567' }),
    ];
    for (const res of cases) {
      expect(res.status).toBe(401);
      expect(res.json).toEqual({ ok: false, error: 'invalid signature' });
    }
    const metrics = (await stack.request('GET', '/metrics')).text;
    expect(metrics).toMatch(/den_signature_failures_total\{route="\/v1\/webhooks\/connectors\/github",reason="missing"\} [1-9]/);
    expect(metrics).toMatch(/den_signature_failures_total\{route="\/v1\/webhooks\/connectors\/github",reason="mismatch"\} [2-9]/);
    expect(metrics).toMatch(/den_signature_failures_total\{route="\/v1\/webhooks\/connectors\/github",reason="malformed"\} [1-9]/);
  });

  it('the signature is checked before anything else: an unsigned ping or garbage body is 401', async () => {
    const ping = await deliver(stack, {
      event: 'ping',
      payload: githubExample('ping'),
      secret: SECRET,
      signature: 'sha256=' + '0'.repeat(64),
    });
    expect(ping.status).toBe(401);
    const garbage = await deliver(stack, { event: 'push', raw: '{nope', secret: SECRET, signature: null });
    expect(garbage.status).toBe(401);
    expect(garbage.json).toEqual({ ok: false, error: 'invalid signature' });
  });

  it('accepts the previous secret during a rotation', async () => {
    const r = repo();
    await addTarget(r);
    const deliveryId = randomUUID();
    const res = await deliver(stack, { event: 'push', deliveryId, payload: pushPayload(r), secret: PREVIOUS });
    expect(res.status).toBe(202);
    expect(res.json).toEqual(accepted('push', deliveryId));
  });

  it('a body that is not JSON, once the signature matched → 400 InvalidRequestError', async () => {
    const res = await deliver(stack, { event: 'push', raw: '{"ref": "refs/heads/main",', secret: SECRET });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: 'invalid_request', details: [{ message: 'Body is not valid JSON.', path: [] }] });
    const array = await deliver(stack, { event: 'push', raw: '[]', secret: SECRET });
    expect(array.status).toBe(400);
    expect(array.json.details[0].message).toBe('Body must be a JSON object.');
  });

  it(`a signed body nested deeper than ${MAX_JSON_DEPTH} levels → 400 with the path`, async () => {
    const raw = `{"ref":"refs/heads/main","x":${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}}`;
    const res = await deliver(stack, { event: 'push', raw, secret: SECRET });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({
      error: 'invalid_request',
      details: [{ message: expect.any(String), path: ['x', ...Array<string>(MAX_JSON_DEPTH - 1).fill('0')] }],
    });
  });

  it('a 26 MB body → 413 with plain text', async () => {
    const raw = Buffer.alloc(26 * 1024 * 1024, 0x20);
    const res = await deliver(stack, { event: 'push', raw, secret: SECRET, signature: 'sha256=' + '0'.repeat(64) });
    expect(res.status).toBe(413);
    expect(res.headers.get('content-type')).toContain('text/plain');
    expect(res.text).toBe('Payload too large: the limit is 26214400 bytes.');
  });
});

describe('redelivery', () => {
  it('the same delivery id twice, concurrently, starts one workflow; a late redelivery gets the same answer', async () => {
    const r = repo();
    const targetId = await addTarget(r);
    const deliveryId = randomUUID();
    const raw = JSON.stringify(pushPayload(r));
    const [a, b] = await Promise.all([
      deliver(stack, { event: 'push', deliveryId, raw, secret: SECRET }),
      deliver(stack, { event: 'push', deliveryId, raw, secret: SECRET }),
    ]);
    for (const res of [a, b]) {
      expect(res.status).toBe(202);
      expect(res.json).toEqual(accepted('push', deliveryId));
    }
    const summary = await deliveryResult(stack, deliveryId);
    expect(summary.syncEvents).toEqual([expect.objectContaining({ targetId, created: true })]);

    // After the first workflow finished, GitHub's "Redeliver" button: same id, same answer.
    const late = await deliver(stack, { event: 'push', deliveryId, raw, secret: SECRET });
    expect(late.status).toBe(202);
    expect(late.json).toEqual(accepted('push', deliveryId));

    const { client } = stack.services.temporal;
    const workflowId = githubDeliveryWorkflowId(deliveryId);
    const runs = await waitFor(async () => {
      const found = [];
      for await (const execution of client.workflow.list({ query: `WorkflowId = "${workflowId}"` })) found.push(execution);
      return found.length > 0 && found;
    });
    expect(runs).toHaveLength(1);
    const handle = client.workflow.getHandle(workflowId);
    const description = await handle.describe();
    expect(description.status.name).toBe('COMPLETED');
    expect(description.runId).toBe(runs[0]!.runId);
    const history = await handle.fetchHistory();
    const started = (history.events ?? []).filter((e) => e.workflowExecutionStartedEventAttributes);
    expect(started).toHaveLength(1);
    expect(await syncRows(deliveryId)).toHaveLength(1);

    const metrics = (await stack.request('GET', '/metrics')).text;
    expect(metrics).toMatch(
      /den_ingress_outcomes_total\{route="\/v1\/webhooks\/connectors\/github",outcome="duplicate",reason="push"\} [2-9]/,
    );
  });
});

describe('codehost alias', () => {
  it('serves the same route with the same answers', async () => {
    const ping = await deliver(stack, { path: CODEHOST_PATH, event: 'ping', payload: githubExample('ping'), secret: SECRET });
    expect(ping.status).toBe(200);
    expect(ping.json).toEqual(notAccepted('ping'));

    const unsigned = await deliver(stack, {
      path: CODEHOST_PATH,
      event: 'ping',
      payload: githubExample('ping'),
      secret: SECRET,
      signature: null,
    });
    expect(unsigned.status).toBe(401);
    expect(unsigned.json).toEqual({ ok: false, error: 'invalid signature' });

    const r = repo();
    const targetId = await addTarget(r);
    const deliveryId = randomUUID();
    const raw = JSON.stringify(pushPayload(r));
    const viaAlias = await deliver(stack, { path: CODEHOST_PATH, event: 'push', deliveryId, raw, secret: SECRET });
    expect(viaAlias.status).toBe(202);
    expect(viaAlias.json).toEqual(accepted('push', deliveryId));
    // Both paths share the dedupe key.
    const viaGithub = await deliver(stack, { event: 'push', deliveryId, raw, secret: SECRET });
    expect(viaGithub.status).toBe(202);
    expect(viaGithub.json).toEqual(viaAlias.json);
    const summary = await deliveryResult(stack, deliveryId);
    expect(summary.syncEvents).toEqual([expect.objectContaining({ targetId, status: 'queued' })]);
  });
});

describe('GET /v1/connectors/github/sync-events', () => {
  it("lists the caller's organization's events, newest first, with filters", async () => {
    const r = repo();
    await addTarget(r);
    const ids: string[] = [];
    for (const sha of ['a'.repeat(40), 'b'.repeat(40)]) {
      const payload = pushPayload(r);
      payload.after = sha;
      const deliveryId = randomUUID();
      expect((await deliver(stack, { event: 'push', deliveryId, payload, secret: SECRET })).status).toBe(202);
      await deliveryResult(stack, deliveryId);
      ids.push(deliveryId);
    }
    const res = await stack.request('GET', `/v1/connectors/github/sync-events?repo=${encodeURIComponent(r.fullName.toUpperCase())}`, {
      headers: org.owner.headers,
    });
    expect(res.status).toBe(200);
    expect(res.json.events.map((e: { deliveryId: string }) => e.deliveryId)).toEqual([ids[1], ids[0]]);
    expect(res.json.events[0]).toMatchObject({
      event: 'push',
      kind: 'push',
      status: 'queued',
      repository: r.fullName,
      repositoryId: r.repositoryId,
      installationId: r.installationId,
      headSha: 'b'.repeat(40),
      ref: 'refs/heads/master',
    });

    const limited = await stack.request('GET', `/v1/connectors/github/sync-events?repo=${r.fullName}&limit=1&status=queued`, {
      headers: org.owner.headers,
    });
    expect(limited.json.events.map((e: { deliveryId: string }) => e.deliveryId)).toEqual([ids[1]]);
    const none = await stack.request('GET', `/v1/connectors/github/sync-events?repo=${r.fullName}&status=completed`, {
      headers: org.owner.headers,
    });
    expect(none.json).toEqual({ events: [] });

    const stranger = await createTestOrg(db());
    const theirs = await stack.request('GET', `/v1/connectors/github/sync-events?repo=${r.fullName}`, { headers: stranger.owner.headers });
    expect(theirs.status).toBe(200);
    expect(theirs.json).toEqual({ events: [] });
  });

  it('is for admins: 401 without credentials, 403 for a member, 400 for a bad query', async () => {
    const anonymous = await stack.request('GET', '/v1/connectors/github/sync-events');
    expect(anonymous.status).toBe(401);
    expect(anonymous.json).toEqual({ error: 'unauthorized' });
    const member = await org.addMember('member');
    const forbidden = await stack.request('GET', '/v1/connectors/github/sync-events', { headers: member.headers });
    expect(forbidden.status).toBe(403);
    expect(forbidden.json).toMatchObject({ error: 'forbidden', reason: 'admin_required' });
    const bad = await stack.request('GET', '/v1/connectors/github/sync-events?status=done&limit=0', { headers: org.owner.headers });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toBe('invalid_request');
    expect(bad.json.details.map((d: { path: string[] }) => d.path[0]).sort()).toEqual(['limit', 'status']);
  });
});

describe('OpenAPI', () => {
  it('documents the webhook on both paths (signature auth) and the admin listing', async () => {
    const doc = (await stack.request('GET', '/openapi.json')).json;
    for (const path of ['/v1/webhooks/connectors/github', '/v1/webhooks/connectors/codehost']) {
      const post = doc.paths[path].post;
      expect(post.security).toEqual([]);
      expect(Object.keys(post.responses).sort()).toEqual(['200', '202', '400', '401', '408', '413', '503']);
    }
    expect(doc.paths['/v1/connectors/github/sync-events'].get.security).toEqual([{ bearerAuth: [] }, { denApiKey: [] }]);
  });
});

describe('without App credentials', () => {
  it('records pushes, starts no sync, and shows targets as not_configured (the repository unverified)', async () => {
    const r = repo();
    await bindInstallation(db(), { installationId: r.installationId, organizationId: org.organizationId, via: 'operator' });
    const created = await stack.request('POST', '/v1/connectors/github/targets', {
      headers: org.owner.headers,
      body: { installationId: r.installationId, repository: r.fullName },
    });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ sync: 'not_configured', syncedSha: null, repositoryVerified: false });
    const deliveryId = randomUUID();
    expect((await deliver(stack, { event: 'push', deliveryId, payload: pushPayload(r), secret: SECRET })).status).toBe(202);
    await deliveryResult(stack, deliveryId);
    expect((await syncRows(deliveryId)).map((row) => row.status)).toEqual(['queued']);
    const shown = await stack.request('GET', `/v1/connectors/github/targets/${created.json.targetId}`, { headers: org.owner.headers });
    expect(shown.json).toMatchObject({ sync: 'not_configured' });
    const forced = await stack.request('POST', `/v1/connectors/github/targets/${created.json.targetId}/sync`, {
      headers: org.owner.headers,
    });
    expect(forced.status).toBe(409);
    expect(forced.json.error).toBe('github_app_not_configured');
    const handle = stack.services.temporal.client.workflow.getHandle(`github-target/${created.json.targetId}`);
    await expect(handle.describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });
});
