/** `den github targets …` through the real binary, against the suite's Postgres. */
import { execFile } from 'node:child_process';
import { loadConfig } from '../../src/main/config';
import { getTarget } from '../../src/github/target-records';
import { openDatabase, type DbHandle } from '../../src/app/store/db';
import { freshId } from '../harness/github';
import { denBin } from '../harness/den-bin';
import { createTestOrg } from '../harness/identity';

const BIN = denBin();
const config = loadConfig();

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `den` as an operator would, with only the database URL of the test config. */
function den(...args: string[]): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: { DATABASE_URL: config.database.url, DATA_DIR: config.dataDir, LOG_LEVEL: 'silent' }, timeout: 30_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

let database: DbHandle;
beforeAll(() => {
  database = openDatabase(config.database.url!, { max: 2 });
});
afterAll(() => database.close());

describe('den github targets', () => {
  it('create prints {targetId}, is idempotent, and list shows the target', async () => {
    const org = await createTestOrg(database.db);
    const installationId = freshId();
    const repositoryId = freshId();
    const args = ['github', 'targets', 'create', '--org', org.organizationId, '--installation-id', String(installationId)];
    expect(
      (await den('github', 'installations', 'bind', '--org', org.organizationId, '--installation-id', String(installationId))).code,
    ).toBe(0);

    const created = await den(...args, '--repo', 'acme/widgets', '--repository-id', String(repositoryId), '--ref', 'main');
    expect(created.code).toBe(0);
    const { targetId } = JSON.parse(created.stdout) as { targetId: string };
    expect(Object.keys(JSON.parse(created.stdout))).toEqual(['targetId']);
    expect(targetId).toMatch(/^ght_[0-9a-z]{26}$/);
    expect(await getTarget(database.db, targetId)).toMatchObject({
      organizationId: org.organizationId,
      installationId,
      repositoryId,
      repository: 'acme/widgets',
      ref: 'refs/heads/main',
      status: 'active',
      repositoryVerified: false,
    });

    const [again, second] = await Promise.all([
      den(...args, '--repo', 'acme/widgets', '--ref', 'refs/heads/main'),
      den(...args, '--repo', 'acme/gadgets'),
    ]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ targetId });
    expect(second.code).toBe(0);
    const secondId = (JSON.parse(second.stdout) as { targetId: string }).targetId;
    expect(secondId).not.toBe(targetId);

    const listed = await den('github', 'targets', 'list', '--org', org.organizationId);
    expect(listed.code).toBe(0);
    const { targets } = JSON.parse(listed.stdout) as {
      targets: { targetId: string; repository: string; ref: string | null; status: string }[];
    };
    expect(targets.map((t) => [t.targetId, t.repository, t.ref, t.status]).sort()).toEqual(
      [
        [targetId, 'acme/widgets', 'refs/heads/main', 'active'],
        [secondId, 'acme/gadgets', null, 'active'],
      ].sort(),
    );
  });

  it('refuses an unknown organization and malformed options with a message and a non-zero exit', async () => {
    const [unknownOrg, badRepo, badInstallation] = await Promise.all([
      den('github', 'targets', 'create', '--org', 'org_nope', '--installation-id', '1', '--repo', 'acme/widgets'),
      den('github', 'targets', 'create', '--org', 'org_nope', '--installation-id', '1', '--repo', 'not a repo'),
      den('github', 'targets', 'create', '--org', 'org_nope', '--installation-id', '-3', '--repo', 'acme/widgets'),
    ]);
    expect(unknownOrg.code).toBe(1);
    expect(unknownOrg.stdout).toBe('');
    expect(unknownOrg.stderr).toBe('den: organization org_nope not found\n');
    expect(badRepo.code).not.toBe(0);
    expect(badRepo.stderr).toContain('must be owner/name');
    expect(badInstallation.code).not.toBe(0);
    expect(badInstallation.stderr).toContain('must be a positive whole number');
  });

  it('show, files and delete a target of the organization; another organization gets not found', async () => {
    const org = await createTestOrg(database.db);
    const installationId = String(freshId());
    await den('github', 'installations', 'bind', '--org', org.organizationId, '--installation-id', installationId);
    const created = await den(
      'github',
      'targets',
      'create',
      '--org',
      org.organizationId,
      '--installation-id',
      installationId,
      '--repo',
      'acme/cli',
    );
    const { targetId } = JSON.parse(created.stdout) as { targetId: string };
    await database.db
      .insertInto('github_target_files')
      .values({ target_id: targetId, path: '.mcp.json', blob_sha: 'abc', size: 2, content: '{}', status: 'ok', error: null })
      .execute();

    const shown = await den('github', 'targets', 'show', '--org', org.organizationId, targetId);
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ targetId, repository: 'acme/cli', sync: 'idle', syncedSha: null, lastSync: null });
    const files = await den('github', 'targets', 'files', '--org', org.organizationId, '--content', targetId);
    expect(JSON.parse(files.stdout)).toEqual({
      files: [{ path: '.mcp.json', blobSha: 'abc', size: 2, status: 'ok', type: 'file', content: '{}' }],
    });

    const stranger = await createTestOrg(database.db);
    const theirs = await den('github', 'targets', 'show', '--org', stranger.organizationId, targetId);
    expect(theirs.code).toBe(1);
    expect(theirs.stderr).toContain('not found');

    expect((await den('github', 'targets', 'delete', '--org', org.organizationId, targetId)).code).toBe(0);
    expect(await getTarget(database.db, targetId)).toBeUndefined();
    expect((await den('github', 'targets', 'delete', '--org', org.organizationId, targetId)).code).toBe(1);
  });
});
