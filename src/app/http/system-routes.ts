import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from './zod';
import { errors } from '../errors';
import { pingDatabase, type DbHandle } from '../store/db';
import { pingTemporal, type TemporalClientHandle } from '../temporal/client';
import type { Metrics } from '../metrics';
import { defineRoute, type Reply, type Route } from './route';
import { OkResponse } from './schemas';

const Readiness = z
  .object({
    ok: z.boolean(),
    checks: z.object({ postgres: z.string(), temporal: z.string(), shutdown: z.string().optional() }),
  })
  .openapi('Readiness');

async function check(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
    return 'ok';
  } catch (error) {
    return `unavailable: ${(error as Error)?.message?.split('\n')[0] ?? 'unknown error'}`;
  }
}

export interface SystemRouteDeps {
  database: DbHandle;
  temporal: TemporalClientHandle;
  metrics: Metrics;
  /** Set when shutdown begins: /ready answers 503 from then on. */
  lifecycle: { shuttingDown: boolean };
  /** The app's OpenAPI document, generated once from every route's schemas. */
  openapiDocument: () => object;
}

/** Health, readiness, metrics, the OpenAPI document and the rendered reference. */
export function createSystemRoutes(deps: SystemRouteDeps): Route[] {
  const { database, temporal, metrics, lifecycle, openapiDocument } = deps;

  const health = defineRoute({
    method: 'get',
    path: '/health',
    summary: 'Liveness: the process answers. Touches no dependency.',
    tags: ['System'],
    auth: 'public',
    responses: { 200: { description: 'Alive.', schema: OkResponse } },
    handler: async () => ({ status: 200, body: { ok: true } }),
  });

  const ready = defineRoute({
    method: 'get',
    path: '/ready',
    summary: 'Readiness: Postgres and Temporal both answer, and the process is not shutting down.',
    tags: ['System'],
    auth: 'public',
    responses: {
      200: { description: 'Ready to take traffic.', schema: Readiness },
      503: { description: 'A dependency is down, or shutdown has begun; the body names which.', schema: Readiness },
    },
    handler: async () => {
      const [postgres, temporalCheck] = await Promise.all([check(() => pingDatabase(database.pool)), check(() => pingTemporal(temporal))]);
      const checks: { postgres: string; temporal: string; shutdown?: string } = { postgres, temporal: temporalCheck };
      if (lifecycle.shuttingDown) checks.shutdown = 'in progress';
      const ok = postgres === 'ok' && temporalCheck === 'ok' && !lifecycle.shuttingDown;
      return { status: ok ? 200 : 503, body: { ok, checks } };
    },
  });

  const metricsRoute = defineRoute({
    method: 'get',
    path: '/metrics',
    summary: 'Prometheus metrics of this API process.',
    tags: ['System'],
    auth: 'public',
    responses: { 200: { description: 'Prometheus text format.', schema: z.string(), contentType: 'text/plain' } },
    handler: async () => {
      const { registry } = metrics;
      return { status: 200, body: await registry.metrics(), headers: { 'content-type': registry.contentType } };
    },
  });

  const openapi = defineRoute({
    method: 'get',
    path: '/openapi.json',
    summary: 'This document: OpenAPI 3.1, generated from the schemas that validate requests.',
    tags: ['System'],
    auth: 'public',
    responses: { 200: { description: 'The OpenAPI document.' } },
    handler: async () => ({ status: 200, body: openapiDocument() }),
  });

  return [health, ready, metricsRoute, openapi, docs, docsAsset];
}

/** The API reference, rendered by swagger-ui from local assets (no CDN). */
const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <title>den control plane — API reference</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css" />
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/init.js"></script>
</body>
</html>`;
const DOCS_INIT = `window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true });`;
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'application/javascript; charset=utf-8',
};
const assetsDir = path.dirname(require.resolve('swagger-ui-dist/package.json'));

const docs = defineRoute({
  method: 'get',
  path: '/docs',
  summary: 'Rendered API reference.',
  tags: ['System'],
  auth: 'public',
  responses: { 200: { description: 'HTML.', contentType: 'text/html', schema: z.string() } },
  handler: async () => ({ status: 200, body: DOCS_HTML, headers: { 'content-type': 'text/html; charset=utf-8' } }),
});

const docsAsset = defineRoute({
  method: 'get',
  path: '/docs/assets/{file}',
  summary: 'Static assets of the API reference.',
  tags: ['System'],
  auth: 'public',
  hidden: true,
  params: z.object({ file: z.string() }),
  responses: { 200: { description: 'Asset.' }, 404: { description: 'No such asset.' } },
  handler: async ({ params }): Promise<Reply> => {
    if (params.file === 'init.js') {
      return { status: 200, body: DOCS_INIT, headers: { 'content-type': 'application/javascript; charset=utf-8' } };
    }
    const type = ASSETS[params.file];
    if (!type) throw errors.notFound();
    return {
      status: 200,
      body: await readFile(path.join(assetsDir, params.file)),
      headers: { 'content-type': type, 'cache-control': 'public, max-age=86400' },
    };
  },
});
