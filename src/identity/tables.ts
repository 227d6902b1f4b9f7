/**
 * The identity feature's tables as Kysely sees them; the DDL is in src/app/store/migrations/0001_identity.ts
 * (runners and their tokens: src/app/store/migrations/0016_runners.ts).
 */
import type { ColumnType } from 'kysely';
import type { Timestamp, NullableTimestamp } from '../app/store/columns';
import type { Role } from '../app/http/auth';

export type { Role };

export interface IdentityTables {
  organizations: {
    id: string;
    name: string;
    created_at: Timestamp;
    /** Its share of the engine's dispatch; null is the default weight, 1 (src/app/temporal/fairness.ts). */
    fairness_weight: ColumnType<number | null, number | null | undefined, number | null>;
  };
  users: { id: string; email: string; created_at: Timestamp };
  members: {
    id: string;
    organization_id: string;
    user_id: string;
    role: Role;
    created_at: Timestamp;
    removed_at: NullableTimestamp;
  };
  api_keys: {
    id: string;
    /** SHA-256 of the raw key, hex. The raw key is never stored. */
    key_hash: string;
    /** The first 8 characters of the raw key, for display. */
    prefix: string;
    name: string;
    member_id: string;
    issued_by_user_id: string;
    created_at: Timestamp;
    expires_at: Timestamp;
    last_used_at: NullableTimestamp;
    revoked_at: NullableTimestamp;
  };
  /** A runtime a member registered by minting a runner token (src/identity/runner-tokens.ts). */
  runners: {
    id: string;
    organization_id: string;
    member_id: string;
    label: string | null;
    /** The API key that minted its first token (null: a session did); revoking the key stops the runner. */
    api_key_id: string | null;
    created_at: Timestamp;
    /** `DELETE /v1/automation-runners/{runnerId}`: every token of the runner stops. */
    revoked_at: NullableTimestamp;
  };
  runner_tokens: {
    /** SHA-256 of the raw token, hex. The raw token is never stored. */
    token_hash: string;
    runner_id: string;
    created_at: Timestamp;
    expires_at: Timestamp;
  };
  sessions: {
    id: string;
    token_hash: string;
    user_id: string;
    active_organization_id: string;
    created_at: Timestamp;
    expires_at: Timestamp;
  };
}

declare module '../app/store/schema' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface Database extends IdentityTables {}
}
