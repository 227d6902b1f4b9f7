/**
 * `npm run bench -- unauthenticated [--uploads 50] [--mib 25] [--signed 4] [--seconds 15]`
 *
 * What unsigned uploads cost the API before their signature can be checked: `--uploads`
 * concurrent GitHub deliveries of `--mib` MiB each, with a signature header of the right shape
 * and the wrong value, streamed as fast as the API reads them, each uploader starting its next
 * upload when the last is answered, for `--seconds`; meanwhile `--signed` connections
 * send small signed pushes in a closed loop. Run twice on the embedded stack: with the default
 * UNAUTHENTICATED_BODY_BUDGET and with a budget no upload can fill (the API before the budget).
 * Reports the API's RSS before, at its peak and 3 s after, the uploads' answers, and the signed
 * pushes acked (202) per second and their p99, alone for 5 s first and then during the uploads.
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { signGithubPayload } from '../src/github/signature';
import { startBenchStack, type BenchStack } from './lib/stack';

const UNBOUNDED = String(64 * 1024 * 1024 * 1024);
const WRONG_SIGNATURE = `sha256=${'ab'.repeat(32)}`;

interface Outcome {
  budget: string;
  rssMiB: { before: number; peak: number; after: number };
  uploads: Record<string, number>;
  signed: { acked: number; other: number; ackedPerSecond: number; p99Ms: number };
  /** The same signed loop for 5 s before the uploads, alone. */
  alone: { ackedPerSecond: number; p99Ms: number };
  seconds: number;
}

async function rssMiB(pid: number): Promise<number> {
  const status = await fs.readFile(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024);
}

/** Streams `mib` MiB of spaces with a wrong signature, honouring back-pressure; resolves with the status (or `reset`). */
function unsignedUpload(url: string, mib: number): Promise<string> {
  return new Promise((resolve) => {
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    const request = http.request(`${url}/v1/webhooks/connectors/github`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-length': mib * chunk.length,
        'x-github-event': 'push',
        'x-github-delivery': randomUUID(),
        'x-hub-signature-256': WRONG_SIGNATURE,
      },
    });
    request.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(String(res.statusCode)));
    });
    request.on('error', () => resolve('reset'));
    let sent = 0;
    const write = () => {
      while (sent < mib) {
        sent++;
        if (!request.write(chunk)) return void request.once('drain', write);
      }
      request.end();
    };
    write();
  });
}

/** Small signed pushes in a closed loop until `stop()`; latencies of the 202s. */
function signedLoop(url: string, secret: string, template: Record<string, unknown>) {
  let running = true;
  const latencies: number[] = [];
  let other = 0;
  const done = (async () => {
    while (running) {
      const deliveryId = randomUUID();
      const body = JSON.stringify({ ...template, after: randomUUID().replace(/-/g, '').padEnd(40, '0') });
      const started = performance.now();
      const res = await fetch(`${url}/v1/webhooks/connectors/github`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-github-event': 'push',
          'x-github-delivery': deliveryId,
          'x-hub-signature-256': signGithubPayload(secret, body),
        },
        body,
      }).catch(() => undefined);
      await res?.arrayBuffer();
      if (res?.status === 202) latencies.push(performance.now() - started);
      else other++;
    }
  })();
  return {
    stop: async () => {
      running = false;
      await done;
      return { latencies, other };
    },
  };
}

const p99 = (values: number[]) => (values.length ? [...values].sort((a, b) => a - b)[Math.floor(values.length * 0.99)]! : 0);

async function measure(
  stack: BenchStack,
  budget: string,
  options: { uploads: number; mib: number; signed: number; seconds: number },
): Promise<Outcome> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const examples = require('@octokit/webhooks-examples/api.github.com/index.json') as {
    name: string;
    examples: Record<string, unknown>[];
  }[];
  const push = examples.find((e) => e.name === 'push')!.examples.find((p) => (p as { installation?: unknown }).installation)!;
  const pid = stack.api.pid!;
  const url = stack.api.url!;
  const baseline = signedLoop(url, stack.secrets.github, push);
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  const alone = (await baseline.stop()).latencies;
  const before = await rssMiB(pid);
  let peak = before;
  const sampler = setInterval(() => void rssMiB(pid).then((rss) => (peak = Math.max(peak, rss))), 50);
  const loops = Array.from({ length: options.signed }, () => signedLoop(url, stack.secrets.github, push));
  const started = performance.now();
  // Each of the uploaders sends its next upload as soon as the last one is answered, for the whole window.
  const deadline = started + options.seconds * 1000;
  const answers: string[] = [];
  await Promise.all(
    Array.from({ length: options.uploads }, async () => {
      do answers.push(await unsignedUpload(url, options.mib));
      while (performance.now() < deadline);
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const signed = await Promise.all(loops.map((loop) => loop.stop()));
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  clearInterval(sampler);
  const after = await rssMiB(pid);
  const latencies = signed.flatMap((s) => s.latencies);
  const uploads: Record<string, number> = {};
  for (const answer of answers) uploads[answer] = (uploads[answer] ?? 0) + 1;
  return {
    budget,
    rssMiB: { before, peak, after },
    uploads,
    signed: {
      acked: latencies.length,
      other: signed.reduce((sum, s) => sum + s.other, 0),
      ackedPerSecond: Math.round(latencies.length / seconds),
      p99Ms: Math.round(p99(latencies)),
    },
    alone: { ackedPerSecond: Math.round(alone.length / 5), p99Ms: Math.round(p99(alone)) },
    seconds: Math.round(seconds * 10) / 10,
  };
}

export async function unauthenticatedMemory(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      uploads: { type: 'string', default: '50' },
      mib: { type: 'string', default: '25' },
      signed: { type: 'string', default: '4' },
      seconds: { type: 'string', default: '15' },
    },
  });
  const options = {
    uploads: Number(values.uploads),
    mib: Number(values.mib),
    signed: Number(values.signed),
    seconds: Number(values.seconds),
  };
  const outcomes: Outcome[] = [];
  for (const budget of ['default (128 MiB)', 'unbounded']) {
    // Every upload comes from 127.0.0.1, as the signed pushes do: one address's share of the
    // budget would hold a single upload. Raised to the whole budget here, so the budget alone is
    // measured, as against uploads from many addresses.
    const apiEnv: Record<string, string> =
      budget === 'unbounded'
        ? { UNAUTHENTICATED_BODY_BUDGET: UNBOUNDED, UNAUTHENTICATED_BODY_PER_ADDRESS: UNBOUNDED }
        : { UNAUTHENTICATED_BODY_PER_ADDRESS: String(128 * 1024 * 1024) };
    const stack = await startBenchStack({ apiEnv });
    try {
      outcomes.push(await measure(stack, budget, options));
    } finally {
      await stack.stop();
    }
  }
  const table = [
    `${options.uploads} concurrent unsigned ${options.mib} MiB GitHub uploads, one after another for ${options.seconds} s, ${options.signed} connections of signed pushes meanwhile:`,
    '',
    '| budget | API RSS before / peak / after (MiB) | uploads answered | signed pushes acked (202) during the uploads | acked/s: alone → during | p99 ms: alone → during | signed not acked |',
    '|---|---|---|---|---|---|---|',
    ...outcomes.map(
      (o) =>
        `| ${o.budget} | ${o.rssMiB.before} / ${o.rssMiB.peak} / ${o.rssMiB.after} | ${Object.entries(o.uploads)
          .map(([status, n]) => `${n} × ${status}`)
          .join(
            ', ',
          )} | ${o.signed.acked} in ${o.seconds} s | ${o.alone.ackedPerSecond} → ${o.signed.ackedPerSecond} | ${o.alone.p99Ms} → ${o.signed.p99Ms} | ${o.signed.other} |`,
    ),
  ].join('\n');
  console.log(table);
  const file = path.join(__dirname, 'results', `${new Date().toISOString().replace(/[:.]/g, '-')}-unauthenticated`);
  await fs.writeFile(`${file}.json`, JSON.stringify({ kind: 'unauthenticated-memory', options, outcomes }, null, 2));
  await fs.writeFile(`${file}.md`, `${table}\n`);
  return 0;
}
