import type { Kysely } from 'kysely';

// Filled in by the feature that owns these tables.
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface GithubTables {}

export async function up(_db: Kysely<unknown>): Promise<void> {}

export async function down(_db: Kysely<unknown>): Promise<void> {}
