/**
 * One route = one definition: its zod schemas validate the request at the edge AND produce the
 * OpenAPI document, so the two can't drift. Routes stay thin: parse, verify, call, answer.
 *
 * Pipeline per request (the order matters for the spec's tables):
 *   auth (authenticated/admin only) → path params → raw body within the route's limit →
 *   JSON body schema (json routes) → query schema → handler.
 * Signature routes ('signature') verify inside the handler, because the provider's check order
 * (e.g. Slack: id → size → installation → signature) is part of their contract.
 */
import type { ParameterizedContext } from 'koa';
import type Router from '@koa/router';
import type { RouteConfig } from '@asteasolutions/zod-to-openapi';
import type { ZodType } from 'zod';
import { z } from './zod';
import { errors } from '../errors';
import type { AppContext, AppState } from './context';
import { readRawBody } from './body';
import type { OpenApi } from './openapi';
import { requireAuth, type AuthMode, type Principal } from '../../identity/auth';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface ResponseSpec {
  description: string;
  schema?: ZodType;
  /** Defaults to application/json. */
  contentType?: string;
}

type BodySpec<B extends ZodType> =
  | { kind: 'json'; schema: B; limitBytes: number }
  | { kind: 'raw'; limitBytes: number; contentType: string; description?: string; schema?: ZodType };

export interface RouteDefinition<
  P extends ZodType = ZodType,
  Q extends ZodType = ZodType,
  B extends ZodType = ZodType,
  A extends AuthMode = AuthMode,
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
  /** §5 rule 2: flows that need a signed-in session reject API keys with 403. */
  sessionOnly?: boolean;
  params?: P;
  query?: Q;
  body?: BodySpec<B>;
  responses: Record<number, ResponseSpec>;
  /** Hidden routes are served but left out of the OpenAPI document. */
  hidden?: boolean;
  handler: (
    input: {
      params: z.output<P>;
      query: z.output<Q>;
      body: z.output<B>;
      rawBody: Buffer;
      principal: A extends 'authenticated' | 'admin' ? Principal : Principal | undefined;
    },
    ctx: AppContext,
  ) => Promise<Reply>;
}

/** Identity function that keeps the generic types of a route definition. */
export function defineRoute<P extends ZodType, Q extends ZodType, B extends ZodType, A extends AuthMode>(
  route: RouteDefinition<P, Q, B, A>,
): RouteDefinition<P, Q, B, A> {
  return route;
}

const toKoaPath = (openApiPath: string) => openApiPath.replace(/\{(\w+)\}/g, ':$1');

function securityFor(auth: AuthMode, sessionOnly?: boolean): RouteConfig['security'] {
  if (auth === 'public' || auth === 'signature') return [];
  return sessionOnly ? [{ bearerAuth: [] }] : [{ bearerAuth: [] }, { denApiKey: [] }];
}

function registerOpenApi(openapi: OpenApi, route: RouteDefinition, path: string): void {
  if (route.hidden) return;
  const responses: RouteConfig['responses'] = {};
  for (const [status, spec] of Object.entries(route.responses)) {
    responses[status] = spec.schema
      ? { description: spec.description, content: { [spec.contentType ?? 'application/json']: { schema: spec.schema } } }
      : { description: spec.description };
  }
  const request: RouteConfig['request'] = {};
  if (route.params) request.params = route.params as never;
  if (route.query) request.query = route.query as never;
  if (route.body) {
    const schema = route.body.kind === 'json' ? route.body.schema : (route.body.schema ?? z.string());
    const contentType = route.body.kind === 'json' ? 'application/json' : route.body.contentType;
    request.body = { content: { [contentType]: { schema } }, description: route.body.kind === 'raw' ? route.body.description : undefined };
  }
  openapi.registry.registerPath({
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

export function mountRoute(router: Router<AppState>, openapi: OpenApi, route: RouteDefinition): void {
  const paths = [route.path, ...(route.aliases ?? [])];
  for (const path of paths) registerOpenApi(openapi, route, path);

  const handler = async (ctx: ParameterizedContext<AppState>) => {
    ctx.state.routeTemplate = route.path;
    const principal = await requireAuth(ctx as AppContext, route.auth, { sessionOnly: route.sessionOnly });
    const params = parseOr400(route.params, ctx.params);
    let rawBody: Buffer = Buffer.alloc(0);
    let body: unknown = undefined;
    if (route.body) {
      rawBody = await readRawBody(ctx as AppContext, route.body.limitBytes);
      if (route.body.kind === 'json') body = parseOr400(route.body.schema, parseJson(rawBody));
    }
    const query = parseOr400(route.query, ctx.query);
    const reply = await route.handler({ params, query, body, rawBody, principal: principal as never }, ctx as AppContext);
    ctx.status = reply.status;
    for (const [name, value] of Object.entries(reply.headers ?? {})) ctx.set(name, value);
    if (reply.body !== undefined) ctx.body = reply.body;
  };

  for (const path of paths) router[route.method](toKoaPath(path), handler);
}

/** JSON.parse with a 400 instead of a SyntaxError. Empty bodies parse as `undefined`. */
export function parseJson(raw: Buffer): unknown {
  if (raw.length === 0) return undefined;
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw errors.invalidRequest([{ message: 'Body is not valid JSON.', path: [] }]);
  }
}
