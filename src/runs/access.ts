/** Who may see a run, and the caller a report or claim carries so the run applies the same rule. */
import { isAdmin, type Principal } from '../app/http/auth';
import type { RunCaller } from './contract';

/** A caller's request about one run of their organization: who asks, and which run. */
export interface RunAsk {
  principal: Principal;
  runId: string;
}

/** Members see only their own runs; owners and admins see the organization's. */
export function canSee(principal: Principal, memberId: string | null | undefined): boolean {
  return isAdmin(principal.role) || memberId === principal.memberId;
}

/** The caller a report or claim carries, so the run applies the same rule (src/runs/state.ts `callerMayReach`). */
export function runCaller(principal: Principal): RunCaller {
  return { memberId: principal.memberId, admin: isAdmin(principal.role) };
}
