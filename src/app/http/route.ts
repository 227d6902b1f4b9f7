/**
 * One route = one definition: its zod schemas validate the request at the edge AND produce the
 * OpenAPI document, so the two can't drift. Routes stay thin: parse, verify, call, answer.
 *
 * Pipeline per request (the order matters for the spec's tables):
 *   auth (authenticated/admin only) → path params → raw body within the route's limit →
 *   JSON body schema (json routes) → query schema → request header schema → handler.
 * Signature routes ('signature') verify inside the handler, because the provider's check order
 * (e.g. Slack: id → size → installation → signature) is part of their contract. Their body is read
 * before anyone is authenticated, so before reading it they refuse a declared size over the limit
 * (413), run the route's `beforeBody` checks (the ones that need no body), and hold the body's
 * bytes in the process's unauthenticated budget (503 with `Retry-After` when it is full; 408 when
 * the body arrives too slowly and is cut off).
 */
import type Router from '@koa/router';
import type { RouteConfig } from '@asteasolutions/zod-to-openapi';
import type { ZodObject, ZodType } from 'zod';
import { z } from './zod';
import { AppError, errors } from '../errors';
import type { Metrics } from '../metrics';
import type { AppContext, AppState } from './context';
import { readRawBody, refuseUnread, type BodyWatch } from './body';
import { SMALL_BODY_BYTES, type UnauthenticatedBudget } from './unauthenticated-budget';
import { refuseTooDeep } from './json-depth';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import { withCredentialLines } from './credential-lines';
import { requireAuth, type Authenticator, type AuthMode, type Principal } from './auth';
import { authResponses, bodyTooSlow, InvalidRequestError, PlainText, unauthenticatedBusy } from './schemas';

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

/**
 * The outcome labels of `den_ingress_outcomes_total`; the durable ones come from the ingress
 * gateway, and `deferred` is a delivery kept in Postgres until Temporal takes its workflow.
 */
type IngressOutcome = 'enqueued' | 'deferred' | 'duplicate' | 'closed' | 'ineligible' | 'acknowledged' | 'rejected' | 'not_enqueued';

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Ingress routes: what became of the delivery, counted once by the pipeline (see recordOutcome). */
  outcome?: { outcome: IngressOutcome; reason: string };
}

interface ResponseSpec {
  description: string;
  schema?: ZodType;
  /** Defaults to application/json. */
  contentType?: string;
  /** Response headers the answer carries, for the OpenAPI document (the handler sets them in its `Reply`). */
  headers?: ZodObject;
}

type BodySpec<B extends ZodType> =
  | { kind: 'json'; schema: B; limitBytes: number }
  | { kind: 'raw'; limitBytes: number; contentType: string; description?: string; schema?: ZodType };

export interface RouteDefinition<
  P extends ZodType = ZodType,
  Q extends ZodType = ZodType,
  B extends ZodType = ZodType,
  A extends AuthMode = AuthMode,
  H extends ZodObject = ZodObject,
> {
  method: Method;
  /** OpenAPI form: `/v1/automation-runs/{id}`. */
  path: string;
  /** Other paths served by the same handler (the spec's neutral `chatplatform`/`codehost` words). */
  aliases?: string[];
  summary: string;
  description?: string;
  tags: string[];
  auth: A;
  /** Flows that need a signed-in session reject API keys with 403. */
  sessionOnly?: boolean;
  /** Runner tokens (`den_rt_…`) may call it; every other route refuses them 403 `runner_token`. */
  runnerToken?: boolean;
  params?: P;
  query?: Q;
  /** Request headers the handler reads, keyed by their lowercase names: validated like the query (a 400), and documented. */
  headers?: H;
  body?: BodySpec<B>;
  responses: Record<number, ResponseSpec>;
  /** Hidden routes are served but left out of the OpenAPI document. */
  hidden?: boolean;
  /** Webhook and report routes: every answer is counted in `den_ingress_outcomes_total`. */
  ingress?: boolean;
  /**
   * Signature routes: the checks that need no body (a secret configured, the signature headers'
   * shape and timestamp), run before the body is read, so a request that cannot be authenticated
   * is refused before it costs memory.
   */
  beforeBody?: (input: { params: z.output<P> }, ctx: AppContext) => Promise<void> | void;
  handler: (
    input: {
      params: z.output<P>;
      query: z.output<Q>;
      headers: z.output<H>;
      body: z.output<B>;
      rawBody: Buffer;
      principal: A extends 'authenticated' | 'admin' ? Principal : Principal | undefined;
    },
    ctx: AppContext,
  ) => Promise<Reply>;
}

/** What the pipeline shares between routes: the process's budget for unauthenticated bodies. */
export interface Pipeline {
  unauthenticated: UnauthenticatedBudget;
  /** UNAUTHENTICATED_BODY_MIN_RATE, named in the answer to a body cut off for arriving slower. */
  minBytesPerSecond: number;
  metrics: Metrics;
}

/** A route as the app mounts it: its description, and `serve`, which parses, then calls the handler. */
export type Route = Omit<RouteDefinition, 'handler' | 'beforeBody'> & {
  serve(ctx: AppContext, principal: Principal | undefined, pipeline: Pipeline): Promise<Reply>;
};

/**
 * Checks a definition's types (the handler sees exactly what its schemas produce), then erases
 * them: parsing happens inside `serve`, so routes of any shape mount through one `Route` type.
 */
export function defineRoute<P extends ZodType, Q extends ZodType, B extends ZodType, A extends AuthMode, H extends ZodObject>(
  definition: RouteDefinition<P, Q, B, A, H>,
): Route {
  const { handler, beforeBody, ...meta } = definition;
  return {
    ...(meta as Omit<RouteDefinition, 'handler' | 'beforeBody'>),
    async serve(ctx, principal, pipeline) {
      const params = parseOr400(definition.params, ctx.params);
      let rawBody: Buffer = Buffer.alloc(0);
      let body: unknown = undefined;
      let watch: BodyWatch | undefined;
      try {
        if (definition.body) {
          let limitBytes = definition.body.limitBytes;
          if (definition.auth === 'signature') {
            const checks = async () => beforeBody?.({ params }, ctx);
            ({ watch, limitBytes } = await admitUnauthenticated(ctx, { limitBytes, checks }, pipeline));
          }
          rawBody = await readRawBody(ctx, limitBytes, watch);
          if (definition.body.kind === 'json') body = parseOr400(definition.body.schema, parseJson(rawBody));
        }
        const query = parseOr400(definition.query, ctx.query);
        const headers = parseOr400(definition.headers, ctx.headers);
        return await handler({ params, query, headers, body: body as z.output<B>, rawBody, principal: principal as never }, ctx);
      } finally {
        watch?.hold.release();
      }
    },
  };
}

/** An unauthenticated body not read yet: the route's limit, and the route's own checks that run first. */
interface UnreadBody {
  limitBytes: number;
  checks: () => Promise<void>;
}

/**
 * Before an unauthenticated body is read: a declared size over the limit is a 413, then the
 * route's own checks run, then the body's bytes are held in the budget under the client's
 * address: its declared length, or for a body sent without one (chunked), SMALL_BODY_BYTES at
 * most, which then is its limit too. A full budget is a 503 with `Retry-After`. Every refusal
 * drains the body without holding it. The hold's `cutOff` rejects with a 408 if the budget cuts
 * the body off for arriving too slowly.
 */
async function admitUnauthenticated(
  ctx: AppContext,
  { limitBytes, checks }: UnreadBody,
  { unauthenticated, minBytesPerSecond, metrics }: Pipeline,
): Promise<{ watch: BodyWatch; limitBytes: number }> {
  const declared = ctx.request.length as number | undefined;
  if (declared !== undefined && declared > limitBytes) refuseUnread(ctx, errors.payloadTooLarge(limitBytes));
  await checks().catch((error: unknown) => refuseUnread(ctx, error));
  const bytes = declared ?? Math.min(limitBytes, SMALL_BODY_BYTES);
  let cut: (error: AppError) => void = () => {};
  const cutOff = new Promise<never>((_, reject) => (cut = reject));
  const hold = unauthenticated.reserve(bytes, ctx.state.clientAddress, () => cut(errors.bodyTooSlow(minBytesPerSecond)));
  if (!hold) {
    metrics.unauthenticatedRefusals.inc({ route: ctx.state.routeTemplate ?? 'unknown' });
    refuseUnread(ctx, errors.unauthenticatedBudgetFull());
  }
  return { watch: { hold, cutOff }, limitBytes: declared === undefined ? bytes : limitBytes };
}

const toKoaPath = (openApiPath: string) => openApiPath.replace(/\{(\w+)\}/g, ':$1');

function securityFor(auth: AuthMode, sessionOnly?: boolean): RouteConfig['security'] {
  if (auth === 'public' || auth === 'signature') return [];
  return sessionOnly ? [{ bearerAuth: [] }] : [{ bearerAuth: [] }, { denApiKey: [] }];
}

export function registerOpenApi(registry: OpenAPIRegistry, route: Route): void {
  for (const path of [route.path, ...(route.aliases ?? [])]) registerPath(registry, route, path);
}

/**
 * The answers the pipeline itself gives, whatever the handler does: a route's document lists
 * them even when its definition does not (its own entry, when present, wins).
 */
function pipelineResponses(route: Route): Record<number, ResponseSpec> {
  const implied: Record<number, ResponseSpec> = {};
  if (route.auth === 'authenticated' || route.auth === 'admin') {
    implied[401] = authResponses[401];
    implied[429] = authResponses[429];
    if (route.auth === 'admin' || route.sessionOnly || !route.runnerToken) implied[403] = authResponses[403];
    // Credentials are looked up in Postgres on every request (src/identity/auth.ts).
    implied[503] = authResponses[503];
  }
  // Signed routes refuse a body the process has no room to hold before it can check the
  // signature, and cut off one that arrives too slowly.
  if (route.auth === 'signature' && route.body) {
    implied[503] = unauthenticatedBusy;
    implied[408] = bodyTooSlow;
  }
  if (route.params || route.query || route.body) {
    implied[400] = { description: 'Invalid path parameter, query or body.', schema: InvalidRequestError };
  }
  if (route.headers) {
    implied[400] = { description: 'Invalid path parameter, query, header or body.', schema: InvalidRequestError };
  }
  if (route.body) {
    implied[413] = { description: `Body over ${route.body.limitBytes} bytes.`, schema: PlainText, contentType: 'text/plain' };
  }
  return implied;
}

/** A JSON body is required when its schema refuses an empty one (parseJson reads it as undefined). */
function bodyRequired(body: NonNullable<Route['body']>): boolean {
  return body.kind === 'json' && !body.schema.safeParse(undefined).success;
}

function registerPath(registry: OpenAPIRegistry, route: Route, path: string): void {
  if (route.hidden) return;
  const responses: RouteConfig['responses'] = {};
  const all = { ...pipelineResponses(route), ...route.responses };
  for (const status of Object.keys(all)) {
    const spec = all[Number(status)]!;
    responses[status] = {
      description: spec.description,
      ...(spec.headers ? { headers: spec.headers } : {}),
      ...(spec.schema ? { content: { [spec.contentType ?? 'application/json']: { schema: spec.schema } } } : {}),
    };
  }
  const request: RouteConfig['request'] = {};
  if (route.params) request.params = route.params as never;
  if (route.query) request.query = route.query as never;
  if (route.headers) request.headers = route.headers as never;
  if (route.body) {
    const schema = route.body.kind === 'json' ? route.body.schema : (route.body.schema ?? z.string());
    const contentType = route.body.kind === 'json' ? 'application/json' : route.body.contentType;
    request.body = {
      content: { [contentType]: { schema } },
      description: route.body.kind === 'raw' ? route.body.description : undefined,
      required: bodyRequired(route.body),
    };
  }
  registry.registerPath({
    method: route.method,
    path,
    summary: route.summary,
    description: route.description,
    tags: route.tags,
    security: securityFor(route.auth, route.sessionOnly),
    request,
    responses,
  });
}

function parseOr400<S extends ZodType>(schema: S | undefined, value: unknown): z.output<S> {
  if (!schema) return value as z.output<S>;
  const result = schema.safeParse(value);
  if (!result.success) throw errors.invalidRequestFromZod(result.error);
  return result.data;
}

export interface MountDeps {
  authenticate: Authenticator;
  metrics: Metrics;
  pipeline: Pipeline;
}

export function mountRoute(router: Router<AppState>, route: Route, deps: MountDeps): void {
  const handler = async (ctx: AppContext) => {
    ctx.state.routeTemplate = route.path;
    const serve = async (): Promise<Reply> => {
      const principal = await requireAuth(withCredentialLines(ctx.headers, ctx.req.rawHeaders), deps.authenticate, route);
      ctx.state.principal = principal;
      return route.serve(ctx, principal, deps.pipeline);
    };
    const reply = route.ingress ? await recordOutcome(deps.metrics, route.path, serve) : await serve();
    ctx.status = reply.status;
    for (const [name, value] of Object.entries(reply.headers ?? {})) ctx.set(name, value);
    if (reply.body !== undefined) ctx.body = reply.body;
  };
  for (const path of [route.path, ...(route.aliases ?? [])]) router[route.method](toKoaPath(path), handler);
}

/**
 * The one place ingress outcomes are counted: the reply's outcome (from the ingress gateway, or
 * a not-routed reason), or the error code of a rejection. Labels are the route template and
 * coded values only, so no request can add a label value of its own.
 */
async function recordOutcome(metrics: Metrics, route: string, serve: () => Promise<Reply>): Promise<Reply> {
  try {
    const reply = await serve();
    const { outcome, reason } = reply.outcome ?? { outcome: 'acknowledged', reason: 'ok' };
    metrics.ingress.inc({ route, outcome, reason });
    return reply;
  } catch (error) {
    const reason = error instanceof AppError ? (error.dependency ? `${error.dependency}_unavailable` : error.code) : 'internal';
    metrics.ingress.inc({ route, outcome: 'rejected', reason });
    throw error;
  }
}

/**
 * JSON.parse with a 400 instead of a SyntaxError, whatever the Content-Type. Any JSON value, a
 * bare string or number too, goes on to the route's schema; an empty body parses as `undefined`.
 */
function parseJson(raw: Buffer): unknown {
  if (raw.length === 0) return undefined;
  try {
    return refuseTooDeep(JSON.parse(raw.toString('utf8')));
  } catch (error) {
    if (error instanceof AppError) throw error;
    throw errors.invalidRequest([{ message: 'Body is not valid JSON.', path: [] }]);
  }
}
