/**
 * The database as Kysely sees it: the union of each feature's tables. Each feature keeps its
 * table types in its own `tables.ts`; the migrations hold only DDL.
 */
import type { IdentityTables } from '../../identity/tables';
import type { RunTables } from '../../runs/tables';
import type { SlackTables } from '../../slack/tables';
import type { GithubTables } from '../../github/tables';

export interface Database extends IdentityTables, RunTables, SlackTables, GithubTables {}
