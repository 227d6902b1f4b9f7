/**
 * The database as Kysely sees it. It starts empty: each feature adds its tables from its own
 * `tables.ts` by declaration merging (`declare module '../app/store/schema'`), so this floor names
 * no feature and a new feature's tables need no edit here. The migrations hold the DDL (and 0011
 * also binds existing GitHub targets' installations to their organizations).
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface Database {}
