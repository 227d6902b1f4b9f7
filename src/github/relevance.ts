/**
 * Which GitHub deliveries become sync work.
 *
 * Decided from the headers and the payload alone: no database on the hot path, because GitHub
 * gives a delivery 10 s and never retries by itself. Whether a push matches a connected
 * target is the workflow's question, not the front door's.
 *
 * The result is a compact `GithubDeliveryInput`, never the payload itself (pushes can be
 * 25 MB; Temporal payloads fail at 2 MB).
 */
import type { components } from '@octokit/openapi-webhooks-types';
import type { GithubDeliveryInput, GithubRepositoryRef } from './contract';
import { pathDeeperThan, TOO_DEEP_MESSAGE } from '../app/http/json-depth';

/** The stable `reason`s of the not-accepted answer. Documented in docs/github.md. */
export const IGNORED = {
  missingEventHeader: 'missing X-GitHub-Event header',
  missingDeliveryHeader: 'missing X-GitHub-Delivery header',
  invalidDeliveryHeader: 'invalid X-GitHub-Delivery header',
  ping: 'ping',
  eventIgnored: 'event ignored',
  actionIgnored: 'action ignored',
  refDeleted: 'ref deleted',
  missingInstallation: 'missing installation id',
  missingRepository: 'missing repository',
  missingRef: 'missing ref',
  missingHeadSha: 'missing head sha',
  missingRepositories: 'missing repositories',
  noMatchingTarget: 'no matching target',
} as const;

type IgnoredReason = (typeof IGNORED)[keyof typeof IGNORED];

export type DeliveryHeaders = { ok: true; event: string; deliveryId: string } | { ok: false; reason: IgnoredReason };

export type Classification =
  | { accepted: false; reason: IgnoredReason }
  | { accepted: true; event: GithubDeliveryInput['event']; deliveryId: string; input: GithubDeliveryInput };

const RELEVANT_ACTIONS = {
  installation: ['deleted', 'suspend', 'unsuspend'],
  installation_repositories: ['added', 'removed'],
  repository: ['renamed', 'deleted', 'transferred'],
} as const;

/**
 * GitHub's delivery ids are GUIDs. The id becomes part of a workflow id, so anything outside a
 * conservative alphabet is refused rather than passed on.
 */
const DELIVERY_ID_SHAPE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
/** A branch or tag deletion pushes `after` = the null object id (SHA-1 or SHA-256 repositories). */
const NULL_SHA = /^0+$/;
const SHA_SHAPE = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/i;
const FULL_NAME_SHAPE = /^[A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,100}$/;

function single(value: string | string[] | undefined): string | undefined {
  if (Array.isArray(value)) return value.length === 1 ? value[0] : undefined;
  return value;
}

/** Step one, before the body is parsed: the two headers every delivery carries. */
export function readDeliveryHeaders(headers: Record<string, string | string[] | undefined>): DeliveryHeaders {
  const event = single(headers['x-github-event'])?.trim();
  if (!event) return { ok: false, reason: IGNORED.missingEventHeader };
  const deliveryId = single(headers['x-github-delivery'])?.trim();
  if (!deliveryId) return { ok: false, reason: IGNORED.missingDeliveryHeader };
  if (!DELIVERY_ID_SHAPE.test(deliveryId)) return { ok: false, reason: IGNORED.invalidDeliveryHeader };
  return { ok: true, event, deliveryId };
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

type Schemas = components['schemas'];

/**
 * A payload as GitHub documents it (`@octokit/openapi-webhooks-types`), every field possibly
 * absent: the signature proves who sent the body, not that it has every field of the schema, so
 * each value read is still checked (ids positive integers, names of GitHub's shape).
 */
type Partially<T> = T extends readonly (infer U)[] ? Partially<U>[] : T extends object ? { [K in keyof T]?: Partially<T[K]> } : T;
type Payload<Event extends keyof Schemas> = Partially<Schemas[Event]>;

type PushPayload = Payload<'webhook-push'>;
type InstallationPayload = Payload<'webhook-installation-deleted' | 'webhook-installation-suspend' | 'webhook-installation-unsuspend'>;
type InstallationRepositoriesPayload = Payload<'webhook-installation-repositories-added' | 'webhook-installation-repositories-removed'>;
type RepositoryPayload = Payload<'webhook-repository-renamed' | 'webhook-repository-deleted' | 'webhook-repository-transferred'>;

function positiveId(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : undefined;
}

/** A non-empty string, or undefined for anything else. */
function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function repositoryRef(value: Partially<{ id: number; full_name: string }> | undefined): GithubRepositoryRef | undefined {
  if (!isObject(value)) return undefined;
  const id = positiveId(value.id);
  const fullName = text(value.full_name);
  if (id === undefined || fullName === undefined || !FULL_NAME_SHAPE.test(fullName)) return undefined;
  return { id, fullName };
}

/** The names a renamed or transferred repository was known by, for targets stored without an id. */
function previousFullNames(payload: RepositoryPayload, repository: GithubRepositoryRef): string[] {
  const [owner, name] = repository.fullName.split('/') as [string, string];
  const names: string[] = [];
  if (payload.action === 'renamed') {
    const from = text(payload.changes?.repository?.name?.from);
    if (from) names.push(`${owner}/${from}`);
  }
  if (payload.action === 'transferred') {
    const previous = payload.changes?.owner?.from;
    const from = text(previous?.user?.login) ?? text(previous?.organization?.login);
    if (from) names.push(`${from}/${name}`);
  }
  return names.filter((n) => FULL_NAME_SHAPE.test(n) && n !== repository.fullName);
}

type Base = { deliveryId: string; receivedAt: number };
const ignoreDelivery = (reason: IgnoredReason): Classification => ({ accepted: false, reason });
const acceptDelivery = (input: GithubDeliveryInput): Classification => ({
  accepted: true,
  event: input.event,
  deliveryId: input.deliveryId,
  input,
});

function classifyPush(base: Base, payload: PushPayload): Classification {
  const after = payload.after;
  if (typeof after === 'string' && NULL_SHA.test(after)) return ignoreDelivery(IGNORED.refDeleted);
  const installation = positiveId(payload.installation?.id);
  if (installation === undefined) return ignoreDelivery(IGNORED.missingInstallation);
  const repository = repositoryRef(payload.repository);
  if (!repository) return ignoreDelivery(IGNORED.missingRepository);
  const ref = payload.ref;
  if (typeof ref !== 'string' || !ref.startsWith('refs/') || ref.length > 1024) return ignoreDelivery(IGNORED.missingRef);
  if (typeof after !== 'string' || !SHA_SHAPE.test(after)) return ignoreDelivery(IGNORED.missingHeadSha);
  const defaultBranch = text(payload.repository?.default_branch) ?? null;
  const push = {
    ...base,
    event: 'push',
    action: null,
    installationId: installation,
    repository,
    ref,
    headSha: after.toLowerCase(),
  } as const;
  return acceptDelivery({ ...push, defaultBranch: defaultBranch !== null && defaultBranch.length <= 255 ? defaultBranch : null });
}

function classifyInstallation(base: Base, payload: InstallationPayload, action: 'deleted' | 'suspend' | 'unsuspend'): Classification {
  const installation = positiveId(payload.installation?.id);
  if (installation === undefined) return ignoreDelivery(IGNORED.missingInstallation);
  return acceptDelivery({ ...base, event: 'installation', action, installationId: installation });
}

function classifyInstallationRepositories(
  base: Base,
  payload: InstallationRepositoriesPayload,
  action: 'added' | 'removed',
): Classification {
  const installation = positiveId(payload.installation?.id);
  if (installation === undefined) return ignoreDelivery(IGNORED.missingInstallation);
  const list: unknown = action === 'added' ? payload.repositories_added : payload.repositories_removed;
  if (!Array.isArray(list)) return ignoreDelivery(IGNORED.missingRepositories);
  const repositories = list.map(repositoryRef).filter((r): r is GithubRepositoryRef => r !== undefined);
  return acceptDelivery({ ...base, event: 'installation_repositories', action, installationId: installation, repositories });
}

function classifyRepository(base: Base, payload: RepositoryPayload, action: 'renamed' | 'deleted' | 'transferred'): Classification {
  const repository = repositoryRef(payload.repository);
  if (!repository) return ignoreDelivery(IGNORED.missingRepository);
  return acceptDelivery({
    ...base,
    event: 'repository',
    action,
    installationId: positiveId(payload.installation?.id) ?? null,
    repository,
    previousFullNames: previousFullNames(payload, repository),
  });
}

/** Whether `action` is one the event becomes work for. */
function relevant<Event extends keyof typeof RELEVANT_ACTIONS>(
  event: Event,
  action: unknown,
): action is (typeof RELEVANT_ACTIONS)[Event][number] {
  return typeof action === 'string' && (RELEVANT_ACTIONS[event] as readonly string[]).includes(action);
}

/** Step two, once the signature matched and the body parsed as a JSON object: the payload read as GitHub documents it. */
export function classifyDelivery(
  delivery: { event: string; deliveryId: string; receivedAt: number },
  payload: Record<string, unknown>,
): Classification {
  const { event, deliveryId, receivedAt } = delivery;
  const base = { deliveryId, receivedAt };
  if (event === 'ping') return ignoreDelivery(IGNORED.ping);
  if (event === 'push') return classifyPush(base, payload as PushPayload);
  if (event !== 'installation' && event !== 'installation_repositories' && event !== 'repository')
    return ignoreDelivery(IGNORED.eventIgnored);
  const action = payload.action;
  if (event === 'installation') {
    return relevant(event, action)
      ? classifyInstallation(base, payload as InstallationPayload, action)
      : ignoreDelivery(IGNORED.actionIgnored);
  }
  if (event === 'installation_repositories') {
    return relevant(event, action)
      ? classifyInstallationRepositories(base, payload as InstallationRepositoriesPayload, action)
      : ignoreDelivery(IGNORED.actionIgnored);
  }
  return relevant(event, action) ? classifyRepository(base, payload as RepositoryPayload, action) : ignoreDelivery(IGNORED.actionIgnored);
}

/**
 * The body as a JSON object. GitHub sends `application/json`, or, when the hook was created
 * with content type `application/x-www-form-urlencoded`, the same JSON in a `payload` field.
 * The signature covers the bytes as sent, so this runs only after it matched.
 */
export function parseWebhookBody(
  raw: Buffer,
  contentType: string,
): { ok: true; payload: Record<string, unknown> } | { ok: false; message: string; path: string[] } {
  let text = raw.toString('utf8');
  if (contentType.toLowerCase() === 'application/x-www-form-urlencoded') {
    const field = new URLSearchParams(text).get('payload');
    if (field === null) return { ok: false, message: 'Form body has no payload field.', path: ['payload'] };
    text = field;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, message: 'Body is not valid JSON.', path: [] };
  }
  if (!isObject(value)) return { ok: false, message: 'Body must be a JSON object.', path: [] };
  const tooDeep = pathDeeperThan(value);
  if (tooDeep) return { ok: false, message: TOO_DEEP_MESSAGE, path: tooDeep.map(String) };
  return { ok: true, payload: value };
}
