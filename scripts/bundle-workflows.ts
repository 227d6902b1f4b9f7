/**
 * Prebuilds the workflow bundle for production workers (Dockerfile), so a worker starts without
 * running webpack: `tsx scripts/bundle-workflows.ts <out.js>`, then WORKFLOW_BUNDLE_PATH=<out.js>.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { bundleWorkflows } from '../src/app/temporal/worker';
import { WORKFLOW_MODULES } from '../src/main/worker-code';

async function main(): Promise<void> {
  const out = process.argv[2];
  if (!out) throw new Error('usage: tsx scripts/bundle-workflows.ts <out.js>');
  await fs.mkdir(path.dirname(path.resolve(out)), { recursive: true });
  await fs.writeFile(out, await bundleWorkflows(WORKFLOW_MODULES));
  process.stdout.write(`wrote ${out}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${String((error as Error)?.stack ?? error)}\n`);
  process.exit(1);
});
