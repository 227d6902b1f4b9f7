/**
 * Which targets a push is work for, as a pure rule shared by the delivery's effect (which records
 * the work) and the front door (which answers a push no target wants with `no matching target`).
 * A target with a ref takes pushes to that ref only; one without follows the repository's default
 * branch (named by the push, else as the target last learnt it) and takes pushes to it only, never
 * to another branch or a tag. When neither names the default branch, any branch push is taken:
 * its sync reads the default branch from GitHub.
 */
export function refMatches(
  target: { ref: string | null; defaultBranch: string | null },
  push: { ref: string; defaultBranch: string | null },
): boolean {
  if (target.ref !== null) return target.ref === push.ref;
  const branch = push.defaultBranch ?? target.defaultBranch;
  if (branch === null) return push.ref.startsWith('refs/heads/');
  return push.ref === `refs/heads/${branch}`;
}
