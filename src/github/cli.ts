import { Command, InvalidArgumentError } from 'commander';
import { REPOSITORY_FULL_NAME, deleteTarget, findTarget, listTargets, recordResync } from './target-records';
import { createGithubApi } from './api';
import { connectTarget, type ConnectOutcome } from './connect';
import { bindInstallation, listInstallations, listUnboundInstallations } from './installations';
import { listFiles, viewTarget } from './target-views';
import { signalTarget } from './target-signal';
import type { GithubSettings } from './settings';
import { randomUUID } from 'node:crypto';
import { CliError, positiveInt, print, type CliContext } from '../app/cli';
import type { Db } from '../app/store/db';
import { githubReconcileScheduleId, githubReconcileWorkflow } from './contract';

/** How long `den github reconcile` waits for the reconcile it starts; the run itself is given a little longer. */
const RECONCILE_WAIT_MS = 10 * 60_000;

function repository(value: string): string {
  if (!REPOSITORY_FULL_NAME.test(value)) throw new InvalidArgumentError('must be owner/name');
  return value;
}

function ref(value: string): string {
  if (value.trim() === '' || /\s/.test(value.trim())) throw new InvalidArgumentError('must be a ref such as refs/heads/main or main');
  return value;
}

/**
 * `den github targets sync`: what POST …/targets/{targetId}/sync does, for operators with the
 * database and Temporal. The worker's App credentials decide whether it can sync, not the CLI's.
 */
function registerTargetSync(targets: Command, context: CliContext<GithubSettings>): void {
  targets
    .command('sync')
    .description(
      'Force a full resync of a target, as the sync route does. Needs Temporal (TEMPORAL_ADDRESS, else the embedded dev ' +
        'server of a running `npm start`) and a worker on TEMPORAL_TASK_QUEUE. Prints {eventId}.',
    )
    .requiredOption('--org <organizationId>', 'organization id')
    .argument('<targetId>')
    .action((targetId: string, opts: { org: string }) =>
      context.withTemporal(async ({ db, ingress }) => {
        const settings = context.settings();
        const target = await findTarget(db, opts.org, targetId);
        if (!target) throw new CliError(`target ${targetId} not found in ${opts.org}`);
        if (target.status !== 'active') throw new CliError(`target ${targetId} is ${target.status}`);
        const eventId = await recordResync(db, { target, reason: 'manual' });
        await signalTarget(ingress, { target, signal: { eventId, full: true }, idleMs: settings.sync.idleMs, admission: 'bypass' });
        print({ eventId });
      }),
    );
}

/** show, files and delete: what the admin routes do, for operators with the database. */
function registerTargetInspection(targets: Command, context: CliContext<GithubSettings>): void {
  targets
    .command('show')
    .description('A target and its last sync, as stored (the CLI reads no App settings, so never `not_configured`).')
    .requiredOption('--org <organizationId>', 'organization id')
    .argument('<targetId>')
    .action((targetId: string, opts: { org: string }) =>
      context.withDatabase(async ({ db }) => {
        const view = await viewTarget(db, { organizationId: opts.org, targetId, configured: true });
        if (!view) throw new CliError(`target ${targetId} not found in ${opts.org}`);
        print(view);
      }),
    );
  targets
    .command('files')
    .description("A target's synced files.")
    .requiredOption('--org <organizationId>', 'organization id')
    .option('--content', 'include the content (bounded like the route)')
    .argument('<targetId>')
    .action((targetId: string, opts: { org: string; content?: boolean }) =>
      context.withDatabase(async ({ db }) => {
        if (!(await findTarget(db, opts.org, targetId))) throw new CliError(`target ${targetId} not found in ${opts.org}`);
        print({ files: await listFiles(db, targetId, opts.content === true) });
      }),
    );
  targets
    .command('delete')
    .description('Delete a target and its snapshot.')
    .requiredOption('--org <organizationId>', 'organization id')
    .argument('<targetId>')
    .action((targetId: string, opts: { org: string }) =>
      context.withDatabase(async ({ db }) => {
        if (!(await deleteTarget(db, opts.org, targetId))) throw new CliError(`target ${targetId} not found in ${opts.org}`);
        print({ deleted: targetId });
      }),
    );
}

/** The GUIDs the reconcile asked GitHub to redeliver, newest first, each with its tries. */
async function redeliveryRecords(db: Db) {
  const guids = await db.selectFrom('github_redeliveries').selectAll().orderBy('updated_at', 'desc').limit(200).execute();
  const tries =
    guids.length === 0
      ? []
      : await db
          .selectFrom('github_redelivery_tries')
          .selectAll()
          .where(
            'guid',
            'in',
            guids.map((g) => g.guid),
          )
          .orderBy('asked_at', 'asc')
          .execute();
  return guids.map((g) => ({
    guid: g.guid,
    event: g.event,
    outcome: g.outcome,
    tries: g.tries,
    uncountedTries: g.uncounted_tries,
    lastStatusCode: g.last_status_code,
    lastError: g.last_error,
    updatedAt: g.updated_at.toISOString(),
    asks: tries
      .filter((t) => t.guid === g.guid)
      .map((t) => ({ attemptId: Number(t.attempt_id), counted: t.counted, answer: t.answer, at: t.asked_at.toISOString() })),
  }));
}

/**
 * `den github reconcile`: one reconcile now, run by the worker like the Schedule's (the worker
 * holds the App credentials); prints its counts and its pace, and with --verbose the GUIDs it
 * asked GitHub to redeliver. Targets in a known state are reported, not errors: it exits non-zero only when GitHub
 * refused something.
 */
function registerReconcile(github: Command, context: CliContext<GithubSettings>): void {
  github
    .command('reconcile')
    .description(
      'Run the reconcile now: ask GitHub again for failed deliveries, resync targets whose branch moved. Needs Temporal ' +
        '(TEMPORAL_ADDRESS, else the embedded dev server of a running `npm start`) and a worker on TEMPORAL_TASK_QUEUE. ' +
        'Prints {deliveriesSeen, redeliveriesAsked, redeliveriesCapped, listingComplete, redeliveriesWaiting, pointsSpent, ' +
        'stoppedBy, resumeAt, targetsChecked, targetsResynced, targetStates, errors}: what it redelivered, what still ' +
        'waits, what it gave up, the points it spent and why it stopped; exits 1 only when GitHub refused something.',
    )
    .option('--verbose', 'also print the GUIDs the reconcile asked GitHub to redeliver, with their tries and outcome')
    .action((opts: { verbose?: boolean }) =>
      context.withTemporal(async ({ config, ingress, db }) => {
        const summary = await ingress.execute({
          workflow: githubReconcileWorkflow,
          id: `${githubReconcileScheduleId(config.temporal.taskQueue)}/cli-${randomUUID()}`,
          args: [],
          // An operator's own request: no organization's share.
          tenancy: { tenant: 'operator', admission: 'bypass' },
          timeoutMs: RECONCILE_WAIT_MS,
        });
        print(opts.verbose ? { ...summary, redeliveries: await redeliveryRecords(db) } : summary);
        if (summary.errors.length > 0) throw new CliError(`GitHub refused: ${summary.errors.join('; ')}`);
      }),
    );
}

/** What `targets create` says when the target cannot be connected. */
function connectRefusal(
  outcome: Exclude<ConnectOutcome, { ok: true }>,
  opts: { org: string; installationId: number; repo: string },
): string {
  switch (outcome.reason) {
    case 'organization_not_found':
      return `organization ${opts.org} not found`;
    case 'installation_not_owned':
      return (
        `installation ${opts.installationId} is not bound to organization ${opts.org} ` +
        `(bind it with: den github installations bind --org ${opts.org} --installation-id ${opts.installationId})`
      );
    case 'repository_not_accessible':
      return `installation ${opts.installationId} cannot read ${opts.repo}`;
    case 'github_unavailable':
      return `GitHub did not answer the repository check: ${outcome.message}`;
  }
}

/**
 * `den github installations`: an operator binds an installation to an organization directly
 * (self-hosters are trusted; the App's install flow is the way for everyone else), lists the
 * bindings, and lists the installations targets name that nobody owns.
 */
function registerInstallations(github: Command, context: CliContext<GithubSettings>): void {
  const installations = github.command('installations').description('Which organization owns each GitHub App installation.');
  installations
    .command('bind')
    .description(
      "Bind an installation to an organization, re-enabling the organization's targets disabled only for its ownership. " +
        'Refused when another organization owns it, unless --rebind.',
    )
    .requiredOption('--org <organizationId>', 'organization id')
    .requiredOption('--installation-id <n>', 'GitHub App installation id', positiveInt)
    .option('--rebind', "move it from the organization that owns it (that organization's targets on it are disabled)")
    .action((opts: { org: string; installationId: number; rebind?: boolean }) =>
      context.withDatabase(async ({ db }) => {
        const bound = await bindInstallation(db, {
          installationId: opts.installationId,
          organizationId: opts.org,
          via: 'operator',
          rebind: opts.rebind === true,
        });
        if (bound.outcome === 'organization_not_found') throw new CliError(`organization ${opts.org} not found`);
        if (bound.outcome === 'owned_elsewhere') {
          throw new CliError(`installation ${opts.installationId} is bound to organization ${bound.ownerId}; pass --rebind to move it`);
        }
        print({ installationId: opts.installationId, organizationId: opts.org, ...bound });
      }),
    );
  installations
    .command('list')
    .description('Bound installations (of one organization with --org); --unbound: installations targets name that nobody owns.')
    .option('--org <organizationId>', 'only this organization')
    .option('--unbound', 'installations without an owner, with the organizations whose targets name them')
    .action((opts: { org?: string; unbound?: boolean }) =>
      context.withDatabase(async ({ db }) =>
        print({ installations: opts.unbound ? await listUnboundInstallations(db) : await listInstallations(db, opts.org) }),
      ),
    );
}

export function registerGithubCommands(program: Command, context: CliContext<GithubSettings>): void {
  const github = program.command('github').description('GitHub App integration.');
  registerReconcile(github, context);
  registerInstallations(github, context);
  const targets = github.command('targets').description('Connector targets: repositories whose pushes become sync work.');
  targets
    .command('create')
    .description(
      'Connect a repository of a GitHub App installation the organization owns (idempotent). With App credentials ' +
        '(GITHUB_APP_ID and a key) the installation must read the repository; without them the first sync checks it.',
    )
    .requiredOption('--org <organizationId>', 'organization id')
    .requiredOption('--installation-id <n>', 'GitHub App installation id', positiveInt)
    .requiredOption('--repo <owner/name>', 'repository full name', repository)
    .option('--repository-id <n>', "GitHub's repository id (learnt from the first push when omitted)", positiveInt)
    .option('--ref <ref>', 'only this ref, e.g. refs/heads/main (a bare name means a branch)', ref)
    .action((opts: { org: string; installationId: number; repo: string; repositoryId?: number; ref?: string }) =>
      context.withDatabase(async ({ db }) => {
        const settings = context.settings();
        const api = settings.app ? createGithubApi(settings.app, settings.apiBaseUrl) : undefined;
        const connected = await connectTarget(
          { db, api },
          {
            organizationId: opts.org,
            installationId: opts.installationId,
            repositoryFullName: opts.repo,
            repositoryId: opts.repositoryId,
            ref: opts.ref,
          },
        );
        if (!connected.ok) throw new CliError(connectRefusal(connected, opts));
        print({ targetId: connected.targetId });
      }),
    );
  targets
    .command('list')
    .description("An organization's connector targets, oldest first.")
    .requiredOption('--org <organizationId>', 'organization id')
    .action((opts: { org: string }) => context.withDatabase(async ({ db }) => print({ targets: await listTargets(db, opts.org) })));
  registerTargetInspection(targets, context);
  registerTargetSync(targets, context);
}
