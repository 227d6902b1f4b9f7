import { isAdmin, type Principal } from '../app/http/auth';

/** Members see only their own runs; owners and admins see the organization's. */
export function canSee(principal: Principal, memberId: string | null | undefined): boolean {
  return isAdmin(principal.role) || memberId === principal.memberId;
}
