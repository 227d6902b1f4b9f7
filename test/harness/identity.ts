import { randomUUID } from 'node:crypto';
import type { Db } from '../../src/app/store/db';
import type { Role } from '../../src/app/http/auth';
import { addMember, createApiKey, createOrganizationWithOwner, createSession } from '../../src/identity/store';

export interface TestMember {
  organizationId: string;
  userId: string;
  memberId: string;
  role: Role;
  apiKey: string;
  headers: { 'x-api-key': string };
}

/** A fresh organization with an owner, through the same store functions the CLI uses. */
export async function createTestOrg(db: Db, name = `org-${randomUUID()}`) {
  const owner = await createOrganizationWithOwner(db, { name, email: `owner-${randomUUID()}@example.test` });
  const { apiKey } = await createApiKey(db, { memberId: owner.memberId, now: new Date() });
  const ownerMember: TestMember = { ...owner, apiKey, headers: { 'x-api-key': apiKey } };
  return {
    organizationId: owner.organizationId,
    owner: ownerMember,
    /** Adds a member with the role and returns it with a fresh API key. */
    async addMember(role: Role): Promise<TestMember> {
      const member = await addMember(db, { organizationId: owner.organizationId, email: `${role}-${randomUUID()}@example.test`, role });
      const key = await createApiKey(db, { memberId: member.memberId, now: new Date() });
      return { organizationId: owner.organizationId, ...member, apiKey: key.apiKey, headers: { 'x-api-key': key.apiKey } };
    },
    async session(memberId: string, expiresInHours = 1) {
      return createSession(db, { memberId, expiresInHours, now: new Date() });
    },
  };
}
