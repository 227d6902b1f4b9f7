/**
 * The database as Kysely sees it: the union of each feature's tables. Each feature keeps its
 * table types beside its migration, so a change to a table is one place.
 */
import type { IdentityTables } from './migrations/0001_identity';
import type { RunTables } from './migrations/0002_runs';
import type { SlackTables } from './migrations/0003_slack';
import type { GithubTables } from './migrations/0004_github';

export interface Database extends IdentityTables, RunTables, SlackTables, GithubTables {}
