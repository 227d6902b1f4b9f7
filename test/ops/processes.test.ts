/** The real entry points as real processes: config validation, embedded refusal, shutdown order. */
import http from 'node:http';
import { loadConfig } from '../../src/main/config';
import { createTestOrg } from '../harness/identity';
import { freePort } from '../harness/ports';
import { spawnEntry, type Spawned } from '../harness/process';
import { openDatabase } from '../../src/app/store/db';
import { waitFor } from '../harness/wait';

const base = loadConfig();
const baseEnv = (): Record<string, string | undefined> => ({
  DATA_DIR: base.dataDir,
  DATABASE_URL: base.database.url,
  TEMPORAL_ADDRESS: base.temporal.address,
  SECRET_KEY: base.secretKey,
  LOG_LEVEL: 'info',
});

describe('configuration at start-up', () => {
  it('lists every invalid variable in one message and exits non-zero', async () => {
    const proc = spawnEntry('src/bin/serve.ts', { ...baseEnv(), PORT: 'eighty', RUN_LEASE_TIMEOUT: 'forever', LOG_LEVEL: 'loud' });
    const { code } = await proc.exited;
    expect(code).toBe(2);
    const out = proc.output();
    expect(out).toContain('Invalid configuration');
    expect(out).toMatch(/PORT:/);
    expect(out).toMatch(/RUN_LEASE_TIMEOUT: "forever" is not a duration/);
    expect(out).toMatch(/LOG_LEVEL:/);
  });

  it('refuses the benchmark no-enqueue switch in production, naming it (its acks would not be durable)', async () => {
    const proc = spawnEntry('src/bin/serve.ts', {
      ...baseEnv(),
      NODE_ENV: 'production',
      APP_BASE_URL: 'https://den.example',
      BENCH_DISABLE_ENQUEUE: 'true',
    });
    const { code } = await proc.exited;
    expect(code).toBe(2);
    expect(proc.output()).toMatch(/BENCH_DISABLE_ENQUEUE: must not be true when NODE_ENV=production/);
  });

  it('requires APP_BASE_URL in production, naming it (connect links would point at an internal address)', async () => {
    const proc = spawnEntry('src/bin/serve.ts', { ...baseEnv(), NODE_ENV: 'production' });
    const { code } = await proc.exited;
    expect(code).toBe(2);
    expect(proc.output()).toMatch(/APP_BASE_URL: is required when NODE_ENV=production/);
  });

  it.each(['src/bin/serve.ts', 'src/bin/worker.ts'])('%s refuses embedded servers unless EMBEDDED=true', async (entry) => {
    const proc = spawnEntry(entry, { ...baseEnv(), DATABASE_URL: undefined });
    const { code } = await proc.exited;
    expect(code).toBe(1);
    expect(proc.output()).toContain('DATABASE_URL unset');
    expect(proc.output()).toContain('EMBEDDED=true');
  });
});

describe('shutdown of the API process', () => {
  let proc: Spawned | undefined;
  afterEach(async () => {
    if (proc && proc.child.exitCode === null) {
      proc.child.kill('SIGKILL');
      await proc.exited;
    }
  });

  async function startServe(extra: Record<string, string>) {
    const port = await freePort();
    proc = spawnEntry('src/bin/serve.ts', { ...baseEnv(), PORT: String(port), ...extra });
    const url = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await fetch(`${url}/ready`)).status === 200, 30_000, { intervalMs: 200 });
    return url;
  }

  /** A request whose body arrives slowly, so it is in flight when the signal lands. */
  function slowRequest(url: string, token: string) {
    const body = JSON.stringify({ organizationId: 'org_nobody' });
    const req = http.request(`${url}/v1/session/active-organization`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
      req.on('response', (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, body: text }));
      });
      req.on('error', reject);
    });
    req.write(body.slice(0, 5));
    return { finish: () => req.end(body.slice(5)), response };
  }

  async function sessionToken() {
    const database = openDatabase(base.database.url!);
    try {
      const org = await createTestOrg(database.db);
      return (await org.session(org.owner.memberId)).token;
    } finally {
      await database.close();
    }
  }

  it('turns /ready 503 first, lets in-flight requests finish, then exits 0', async () => {
    const url = await startServe({ SHUTDOWN_READY_DELAY: '1500ms', SHUTDOWN_GRACE: '10s' });
    const inFlight = slowRequest(url, await sessionToken());
    await new Promise((r) => setTimeout(r, 200));
    proc!.child.kill('SIGTERM');
    await waitFor(async () => (await fetch(`${url}/ready`)).status === 503, 1000, { intervalMs: 50 });
    const ready = (await (await fetch(`${url}/ready`)).json()) as { checks: { shutdown?: string } };
    expect(ready.checks.shutdown).toBe('in progress');

    inFlight.finish();
    const answered = await inFlight.response;
    expect(answered.status).toBe(404); // the handler ran to completion: not a member of org_nobody
    const { code } = await proc!.exited;
    expect(code).toBe(0);
    expect(proc!.output()).toContain('"msg":"stopped"');
  }, 60_000);

  it('a second signal forces the exit while a request is still hanging', async () => {
    const url = await startServe({ SHUTDOWN_READY_DELAY: '0s', SHUTDOWN_GRACE: '60s' });
    const hanging = slowRequest(url, await sessionToken());
    hanging.response.catch(() => undefined);
    await new Promise((r) => setTimeout(r, 200));
    proc!.child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    expect(proc!.child.exitCode).toBeNull();
    const started = Date.now();
    proc!.child.kill('SIGTERM');
    const { code } = await proc!.exited;
    expect(code).toBe(130);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(proc!.output()).toContain('second signal: forcing exit');
  }, 60_000);
});
