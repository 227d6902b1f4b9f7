/**
 * Fixed-concurrency, fixed-duration load with autocannon, where every request is generated (and
 * signed) fresh, and every 2xx is remembered by id so durability can be checked afterwards.
 */
import autocannon from 'autocannon';

export interface GeneratedRequest {
  id: string;
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

/**
 * What generates the load: the next request, and optionally what became of each one, for a
 * sender that resends what was refused (a runtime sends a refused run event again: its run waits
 * for that sequence).
 */
export type RequestSource = (() => GeneratedRequest) & { answered?: (id: string, status: number) => void };

export interface LoadResult {
  requests: number;
  rps: number;
  latency: { p50: number; p99: number; max: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  statuses: Record<string, number>;
  /** Ids of requests answered 2xx: each must be durable. */
  acked: string[];
}

export async function runLoad(options: {
  /** Several URLs: autocannon assigns connections to them in turn. */
  url: string | string[];
  connections: number;
  durationSeconds: number;
  next: RequestSource;
}): Promise<LoadResult> {
  const acked: string[] = [];
  const statuses: Record<string, number> = {};
  const result = await autocannon({
    // autocannon 8 takes an array of URLs; its published types say string.
    url: options.url as string,
    connections: options.connections,
    duration: options.durationSeconds,
    pipelining: 1,
    timeout: 10,
    requests: [
      {
        setupRequest: (request: autocannon.Request, context: object) => {
          const generated = options.next();
          (context as { id?: string }).id = generated.id;
          return { ...request, method: generated.method, path: generated.path, headers: generated.headers, body: generated.body };
        },
        onResponse: (status: number, _body: string, context: object) => {
          statuses[status] = (statuses[status] ?? 0) + 1;
          const { id } = context as { id: string };
          if (status >= 200 && status < 300) acked.push(id);
          options.next.answered?.(id, status);
        },
      },
    ],
  });
  return {
    requests: result.requests.total,
    rps: result.requests.total / options.durationSeconds,
    latency: { p50: result.latency.p50, p99: result.latency.p99, max: result.latency.max },
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statuses,
    acked,
  };
}

/** Runs `fn` at a fixed concurrency for a fixed time; the ceiling measurement uses it. */
export async function runClosedLoop(options: {
  concurrency: number;
  durationSeconds: number;
  fn: (i: number) => Promise<void>;
}): Promise<{ completed: number; failed: number; rps: number; latency: { p50: number; p99: number; max: number } }> {
  const deadline = Date.now() + options.durationSeconds * 1000;
  const latencies: number[] = [];
  let counter = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: options.concurrency }, async () => {
      while (Date.now() < deadline) {
        const started = performance.now();
        try {
          await options.fn(counter++);
          latencies.push(performance.now() - started);
        } catch {
          failed += 1;
        }
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0);
  return {
    completed: latencies.length,
    failed,
    rps: latencies.length / options.durationSeconds,
    latency: { p50: at(0.5), p99: at(0.99), max: Math.round(latencies[latencies.length - 1] ?? 0) },
  };
}

/** Checks ids with bounded concurrency; returns the ones that fail the check. */
export async function findMissing(ids: string[], check: (id: string) => Promise<boolean>, concurrency = 16): Promise<string[]> {
  const missing: string[] = [];
  let index = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (index < ids.length) {
        const id = ids[index++]!;
        if (!(await check(id).catch(() => false))) missing.push(id);
      }
    }),
  );
  return missing;
}
