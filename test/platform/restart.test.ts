/**
 * The embedded defaults keep their data: a Postgres row and a Temporal workflow survive a stop
 * and start of the embedded servers (the same code path `npm start` uses).
 */
import { ping } from '../../workflows/ping';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfigWith } from '../../src/main/config';
import { createLogger } from '../../src/app/log';
import { ensureDependencies } from '../../src/main/infrastructure';
import { openDatabase } from '../../src/app/store/db';
import { migrateToLatest } from '../../src/app/store/migrate';
import { createTemporalClient } from '../../src/app/temporal/client';
import { pingWorkflowId } from '../../src/app/temporal/contract';
import { freePort } from '../harness/ports';

it('a workflow and a Postgres row survive a restart of the embedded servers', async () => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'den-restart-'));
  const config = loadConfigWith({
    DATA_DIR: dataDir,
    DATABASE_URL: undefined,
    TEMPORAL_ADDRESS: undefined,
    EMBEDDED_PG_PORT: String(await freePort()),
    TEMPORAL_DEV_PORT: String(await freePort()),
    TEMPORAL_DEV_HEADLESS: 'true',
  });
  const log = createLogger({ level: 'silent' });
  const workflowId = pingWorkflowId(randomUUID());
  const orgId = `org_${randomUUID()}`;

  async function withStack<T>(
    fn: (handles: { db: ReturnType<typeof openDatabase>; temporal: ReturnType<typeof createTemporalClient> }) => Promise<T>,
  ) {
    const deps = await ensureDependencies(config, log, true);
    expect(deps.embedded).toEqual({ postgres: true, temporal: true });
    const db = openDatabase(deps.databaseUrl);
    const temporal = createTemporalClient({ address: deps.temporalAddress, namespace: 'default', taskQueue: 'restart-test' });
    try {
      return await fn({ db, temporal });
    } finally {
      await temporal.close();
      await db.close();
      await deps.stop();
    }
  }

  try {
    await withStack(async ({ db, temporal }) => {
      await migrateToLatest(db.db);
      await db.db.insertInto('organizations').values({ id: orgId, name: 'Survivor' }).execute();
      // No worker listens on this queue, so the workflow stays open across the restart.
      await temporal.client.workflow.start(ping, { taskQueue: 'restart-test', workflowId, args: ['x'] });
    });

    await withStack(async ({ db, temporal }) => {
      const row = await db.db.selectFrom('organizations').selectAll().where('id', '=', orgId).executeTakeFirst();
      expect(row?.name).toBe('Survivor');
      const description = await temporal.client.workflow.getHandle(workflowId).describe();
      expect(description.status.name).toBe('RUNNING');
      expect(description.type).toBe('ping');
    });
  } finally {
    await fs.rm(dataDir, { recursive: true, force: true });
  }
}, 120_000);
