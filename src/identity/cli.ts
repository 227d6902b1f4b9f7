import { Command, InvalidArgumentError } from 'commander';
import {
  addMember,
  createApiKey,
  createOrganizationWithOwner,
  createSession,
  listApiKeys,
  listOrganizationMembers,
  removeMember,
  revokeApiKey,
  setFairnessWeight,
} from './store';
import { ROLES, type Role } from '../app/http/auth';
import { positiveInt, print, type CliContext } from '../app/cli';

function role(value: string): Role {
  if (!ROLES.includes(value as Role)) throw new InvalidArgumentError(`must be one of ${ROLES.join(', ')}`);
  return value as Role;
}

function weight(value: string): number | null {
  if (value === 'default') return null;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0.001 || n > 1000) throw new InvalidArgumentError('must be a number from 0.001 to 1000, or "default"');
  return n;
}

function email(value: string): string {
  if (!/^[^\s@]+@[^\s@]+$/.test(value)) throw new InvalidArgumentError('must be an email address');
  return value;
}

/** An organization's fairness weight (src/app/temporal/fairness.ts). */
function registerFairnessWeightCommand(program: Command, context: CliContext): void {
  program
    .command('fairness-weight')
    .description(
      "Set an organization's share: of the engine's dispatch (default 1; 2 gets twice the share of a busy queue) " +
        'and of the front door (its admission rate is ADMISSION_ORG_RATE × weight). ' +
        'API processes pick it up within TEMPORAL_FAIRNESS_WEIGHT_TTL, no restart.',
    )
    .requiredOption('--org <organizationId>', 'organization id')
    .requiredOption('--weight <weight>', 'a number from 0.001 to 1000, or "default"', weight)
    .action((opts: { org: string; weight: number | null }) =>
      context.withDatabase(async ({ db }) => print(await setFairnessWeight(db, opts.org, opts.weight))),
    );
}

export function registerIdentityCommands(program: Command, context: CliContext): void {
  program
    .command('bootstrap')
    .description('Create an organization, its first user as owner, and an API key for them.')
    .requiredOption('--org-name <name>', 'organization name')
    .requiredOption('--email <email>', "the owner's email", email)
    .action((opts: { orgName: string; email: string }) =>
      context.withDatabase(async ({ db }) => {
        const owner = await createOrganizationWithOwner(db, { name: opts.orgName, email: opts.email });
        const key = await createApiKey(db, { memberId: owner.memberId, name: 'bootstrap', now: new Date() });
        print({ ...owner, apiKey: key.apiKey });
      }),
    );

  registerFairnessWeightCommand(program, context);

  const members = program.command('members').description('Organization members.');
  members
    .command('create')
    .description('Add a user (created if new) to an organization with a role.')
    .requiredOption('--org <organizationId>', 'organization id')
    .requiredOption('--email <email>', 'email', email)
    .requiredOption('--role <role>', 'owner, admin or member', role)
    .action((opts: { org: string; email: string; role: Role }) =>
      context.withDatabase(async ({ db }) => print(await addMember(db, { organizationId: opts.org, email: opts.email, role: opts.role }))),
    );
  members
    .command('list')
    .description("List an organization's members: ids, emails, roles, when they were added (and removed, with --include-removed).")
    .requiredOption('--org <organizationId>', 'organization id')
    .option('--include-removed', 'also list removed members')
    .action((opts: { org: string; includeRemoved?: boolean }) =>
      context.withDatabase(async ({ db }) =>
        print(await listOrganizationMembers(db, { organizationId: opts.org, includeRemoved: opts.includeRemoved === true })),
      ),
    );
  members
    .command('remove <memberId>')
    .description('Remove a member; their API keys and sessions stop working.')
    .action((memberId: string) => context.withDatabase(async ({ db }) => print(await removeMember(db, memberId, new Date()))));

  const keys = program.command('api-keys').description('Organization API keys (sent in x-api-key).');
  keys
    .command('create')
    .description('Create an API key scoped to a member. The raw key is printed once; only its hash is stored.')
    .requiredOption('--member <memberId>', 'member the key acts as')
    .option('--name <name>', 'a label for the key')
    .option('--expires-in-days <n>', 'lifetime in days (default 90)', positiveInt)
    .action((opts: { member: string; name?: string; expiresInDays?: number }) =>
      context.withDatabase(async ({ db }) =>
        print(await createApiKey(db, { memberId: opts.member, name: opts.name, expiresInDays: opts.expiresInDays, now: new Date() })),
      ),
    );
  keys
    .command('list')
    .description(
      'List API keys, revoked and expired ones included, each with its status (active, revoked, expired, member_removed). ' +
        'Never prints key material: no key, no hash, no prefix.',
    )
    .option('--org <organizationId>', "only this organization's keys")
    .option('--member <memberId>', "only this member's keys")
    .action((opts: { org?: string; member?: string }) =>
      context.withDatabase(async ({ db }) =>
        print(await listApiKeys(db, { organizationId: opts.org, memberId: opts.member, now: new Date() })),
      ),
    );
  keys
    .command('revoke <id>')
    .description('Revoke an API key.')
    .action((id: string) => context.withDatabase(async ({ db }) => print(await revokeApiKey(db, id, new Date()))));

  program
    .command('sessions')
    .description('Sign-in sessions (sent as Authorization: Bearer).')
    .command('create')
    .description("Create a session for a member's user, active in the member's organization.")
    .requiredOption('--member <memberId>', 'member')
    .option('--expires-in-hours <n>', 'lifetime in hours (default 24)', positiveInt)
    .action((opts: { member: string; expiresInHours?: number }) =>
      context.withDatabase(async ({ db }) =>
        print(await createSession(db, { memberId: opts.member, expiresInHours: opts.expiresInHours, now: new Date() })),
      ),
    );
}
