/**
 * Migration 0011 on a database of its own: targets created before installations had owners are
 * migrated to bindings, an installation two organizations' targets name is left unbound and
 * reported, and an operator's `den github installations bind` (through the real binary) settles
 * it, re-enabling the owner's targets. The migration runs for real, from 0010 to the latest.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Migrator } from 'kysely';
import { typeid } from 'typeid-js';
import { loadConfig } from '../../src/main/config';
import { migrations } from '../../src/app/store/migrations';
import { openDatabase, type DbHandle } from '../../src/app/store/db';
import type { GithubTargetStatus } from '../../src/github/tables';
import { freshId } from '../harness/github';
import { denBin } from '../harness/den-bin';
import { createTestOrg } from '../harness/identity';

const BIN = denBin();
const config = loadConfig();
const name = `den_migration_${randomBytes(6).toString('hex')}`;
const url = new URL(config.database.url!);
url.pathname = `/${name}`;

let admin: DbHandle;
let database: DbHandle;

function den(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: { DATABASE_URL: url.toString(), DATA_DIR: config.dataDir, LOG_LEVEL: 'silent' }, timeout: 30_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  admin = openDatabase(config.database.url!, { max: 1 });
  await admin.pool.query(`CREATE DATABASE "${name}"`);
  database = openDatabase(url.toString(), { max: 2 });
});
afterAll(async () => {
  await database?.close();
  await admin?.pool.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await admin?.close();
});

const migrator = () => new Migrator({ db: database.db, provider: { getMigrations: async () => migrations } });

async function legacyTarget(organizationId: string, installationId: number, status: GithubTargetStatus, reason: string | null = null) {
  const id = typeid('ght').toString();
  const n = freshId();
  await database.db
    .insertInto('github_connector_targets')
    .values({
      id,
      organization_id: organizationId,
      installation_id: installationId,
      repository_id: n,
      repository_full_name: `legacy-${n}/repo`,
      ref: null,
      status,
      status_reason: reason,
    })
    .execute();
  return id;
}

const statusOf = async (id: string) =>
  database.db.selectFrom('github_connector_targets').select(['status', 'status_reason']).where('id', '=', id).executeTakeFirstOrThrow();
const owners = async () =>
  (await database.db.selectFrom('github_installations').select(['installation_id', 'organization_id', 'bound_via']).execute()).map((r) => ({
    ...r,
    installation_id: Number(r.installation_id),
  }));

it('binds installations of one organization, leaves a contested one unbound and reported, and an operator binds it', async () => {
  const before = await migrator().migrateTo('0010_github_reconcile');
  expect(before.error).toBeUndefined();
  const [x, y, z] = [await createTestOrg(database.db), await createTestOrg(database.db), await createTestOrg(database.db)];
  const [single, contested] = [freshId(), freshId()];
  const xActive = await legacyTarget(x.organizationId, single, 'active');
  const xRemoved = await legacyTarget(x.organizationId, single, 'disabled', 'repository_removed');
  const yActive = await legacyTarget(y.organizationId, contested, 'active');
  const yGone = await legacyTarget(y.organizationId, contested, 'disconnected', 'installation_deleted');
  const zActive = await legacyTarget(z.organizationId, contested, 'active');
  const zRemoved = await legacyTarget(z.organizationId, contested, 'disabled', 'repository_removed');

  const { error, results } = await migrator().migrateToLatest();
  expect(error).toBeUndefined();
  expect(results?.map((r) => [r.migrationName, r.status])).toContainEqual(['0011_installation_bindings', 'Success']);

  expect(await owners()).toEqual([{ installation_id: single, organization_id: x.organizationId, bound_via: 'migration' }]);
  expect(await statusOf(xActive)).toEqual({ status: 'active', status_reason: null });
  expect(await statusOf(xRemoved)).toEqual({ status: 'disabled', status_reason: 'repository_removed' });
  for (const id of [yActive, zActive]) expect(await statusOf(id)).toEqual({ status: 'disabled', status_reason: 'installation_unbound' });
  expect(await statusOf(yGone)).toEqual({ status: 'disconnected', status_reason: 'installation_deleted' });
  expect(await statusOf(zRemoved)).toEqual({ status: 'disabled', status_reason: 'repository_removed' });

  const unbound = await den('github', 'installations', 'list', '--unbound');
  expect(unbound.code).toBe(0);
  expect(JSON.parse(unbound.stdout)).toEqual({
    installations: [
      {
        installationId: contested,
        claimedBy: [
          { organizationId: y.organizationId, targets: 2 },
          { organizationId: z.organizationId, targets: 2 },
        ].sort((a, b) => a.organizationId.localeCompare(b.organizationId)),
      },
    ],
  });

  // Nobody connects a target on an installation their organization does not own.
  const refused = await den(
    'github',
    'targets',
    'create',
    '--org',
    z.organizationId,
    '--installation-id',
    String(single),
    '--repo',
    'acme/x',
  );
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain(`installation ${single} is not bound to organization ${z.organizationId}`);

  const bound = await den('github', 'installations', 'bind', '--org', y.organizationId, '--installation-id', String(contested));
  expect(bound.code).toBe(0);
  expect(JSON.parse(bound.stdout)).toEqual({
    installationId: contested,
    organizationId: y.organizationId,
    outcome: 'bound',
    reenabled: 1,
    disabled: 1,
  });
  expect(await statusOf(yActive)).toEqual({ status: 'active', status_reason: null });
  expect(await statusOf(yGone)).toEqual({ status: 'disconnected', status_reason: 'installation_deleted' });
  expect(await statusOf(zActive)).toEqual({ status: 'disabled', status_reason: 'installation_not_owned' });
  expect(await statusOf(zRemoved)).toEqual({ status: 'disabled', status_reason: 'repository_removed' });
  expect(JSON.parse((await den('github', 'installations', 'list', '--unbound')).stdout)).toEqual({ installations: [] });

  const taken = await den('github', 'installations', 'bind', '--org', z.organizationId, '--installation-id', String(contested));
  expect(taken.code).toBe(1);
  expect(taken.stderr).toBe(`den: installation ${contested} is bound to organization ${y.organizationId}; pass --rebind to move it\n`);
  const moved = await den('github', 'installations', 'bind', '--org', z.organizationId, '--installation-id', String(contested), '--rebind');
  expect(moved.code).toBe(0);
  expect(JSON.parse(moved.stdout)).toMatchObject({ outcome: 'bound', reenabled: 1, disabled: 1 });
  expect(await statusOf(zActive)).toEqual({ status: 'active', status_reason: null });
  expect(await statusOf(yActive)).toEqual({ status: 'disabled', status_reason: 'installation_not_owned' });

  const listed = JSON.parse((await den('github', 'installations', 'list', '--org', z.organizationId)).stdout) as {
    installations: unknown[];
  };
  expect(listed.installations).toEqual([
    {
      installationId: contested,
      organizationId: z.organizationId,
      account: null,
      boundVia: 'operator',
      boundAt: expect.any(String),
      targets: 2,
    },
  ]);
}, 120_000);
