/**
 * A database of its own on the suite's Postgres, migrated to the latest: for tests whose subject
 * reads every row of a table (the GitHub reconcile walks every active target), so other test
 * files running beside them cannot change what they see.
 */
import { randomBytes } from 'node:crypto';
import { openDatabase } from '../../src/app/store/db';
import { migrateToLatest } from '../../src/app/store/migrate';
import { loadConfig } from '../../src/main/config';

export async function ownDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const base = loadConfig().database.url!;
  const name = `den_own_${randomBytes(6).toString('hex')}`;
  const url = new URL(base);
  url.pathname = `/${name}`;
  const admin = openDatabase(base, { max: 1 });
  await admin.pool.query(`CREATE DATABASE "${name}"`);
  const own = openDatabase(url.toString(), { max: 1 });
  try {
    await migrateToLatest(own.db);
  } finally {
    await own.close();
  }
  return {
    url: url.toString(),
    async drop() {
      await admin.pool.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.close();
    },
  };
}
