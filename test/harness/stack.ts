/**
 * A real app instance for one test file: the Koa front door on a free port and, optionally, a
 * worker on a task queue of its own, both against the suite's Temporal and Postgres.
 */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { loadConfigWith, type Config } from '../../src/main/config';
import { listen, type HttpServer } from '../../src/app/http/server';
import type { RemovedRoute } from '../../src/app/http/deprecated';
import { createLogger } from '../../src/app/log';
import { createApi } from '../../src/main/api';
import { unadmittedGateway } from '../../src/main/gateway';
import type { IngressGateway } from '../../src/app/ingress';
import { createInfrastructure, type Infrastructure } from '../../src/main/infrastructure';
import { startFeatureWorker } from '../../src/main/worker';
import type { WorkerHandle } from '../../src/app/temporal/worker';
import type { McpNetworkOverrides } from '../../src/mcp/network';
import { testResolver } from './no-dns';

export interface TestStack {
  config: Config;
  /** What the composition root built for this app (Postgres, Temporal client, metrics, secret key). */
  services: Infrastructure;
  /** A gateway to Temporal's workflows like the worker's (it admits nothing), for tests that call the features' code directly. */
  ingress: IngressGateway;
  http: HttpServer;
  worker?: WorkerHandle;
  url: string;
  /** Everything the app logged, as parsed JSON lines (for redaction and log assertions). */
  logs: Record<string, unknown>[];
  /** Sends a real HTTP request to the app. */
  request(
    method: string,
    path: string,
    init?: { headers?: Record<string, string>; body?: unknown; raw?: string | Buffer },
  ): Promise<TestResponse>;
  stop(): Promise<void>;
}

/** What the request helpers need of an app: where it is and how to send it a request. */
export type HttpTarget = Pick<TestStack, 'url' | 'request'>;

/** Real HTTP requests to an app at `url`: one of the test's own, or a process it started. */
export function httpTarget(url: string): HttpTarget {
  return {
    url,
    async request(method, path, init = {}) {
      const headers: Record<string, string> = { ...init.headers };
      let body: string | Buffer | undefined = init.raw;
      if (body === undefined && init.body !== undefined) {
        body = JSON.stringify(init.body);
        headers['content-type'] ??= 'application/json';
      }
      const response = await fetch(`${url}${path}`, { method, headers, body });
      const text = await response.text();
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      return { status: response.status, headers: response.headers, text, json };
    },
  };
}

export interface TestResponse {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON, or undefined when it isn't JSON. */
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export async function startTestStack(
  options: {
    env?: Record<string, string>;
    worker?: boolean;
    /** The clock of the API's routes and of the worker's GitHub activities. */
    now?: () => number;
    mcpNetwork?: McpNetworkOverrides;
    removedRoutes?: RemovedRoute[];
    /** A port of the test's choosing (0: any free one), for a test whose APP_BASE_URL must be the app's own address. */
    port?: number;
  } = {},
): Promise<TestStack> {
  const taskQueue = `test-${randomUUID()}`;
  // Every limit is the production default (admission, the live-run capacity, heartbeat
  // coalescing): a test that turns one off sets it itself, saying why.
  // Slack's connect replies carry a dashboard's link unless a test sets DASHBOARD_URL to '' (none).
  const config = loadConfigWith({
    TEMPORAL_TASK_QUEUE: taskQueue,
    PORT: '0',
    HOST: '127.0.0.1',
    DASHBOARD_URL: 'https://dashboard.den.test',
    ...options.env,
  });
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
        try {
          logs.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          logs.push({ raw: line });
        }
      }
      done();
    },
  });
  // Capture at debug level so log assertions can see everything; nothing is printed.
  const log = createLogger({ level: 'debug', destination: sink, name: 'test' });
  const services = await createInfrastructure(config, log, {
    databaseUrl: config.database.url!,
    temporalAddress: config.temporal.address!,
    embedded: false,
  });
  let worker: WorkerHandle | undefined;
  if (options.worker) {
    worker = await startFeatureWorker(services, {
      address: config.temporal.address!,
      now: options.now,
      // No test worker ever asks the system's DNS: MCP probes only reach names a test maps.
      mcpNetwork: options.mcpNetwork ?? { resolve: testResolver() },
    });
  }
  const api = createApi(services, { now: options.now, removedRoutes: options.removedRoutes });
  const http = await listen(api, { ...config.http, host: '127.0.0.1', port: options.port ?? 0 });

  return {
    config,
    services,
    ingress: unadmittedGateway({ temporal: services.temporal, db: services.database.db, log, config }),
    http,
    worker,
    url: http.url,
    logs,
    request: httpTarget(http.url).request,
    async stop() {
      services.lifecycle.shuttingDown = true;
      await http.close(1000);
      await worker?.shutdown();
      await services.temporal.close().catch(() => undefined);
      await services.database.close().catch(() => undefined);
    },
  };
}
