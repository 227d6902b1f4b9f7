import { build } from 'esbuild';
import fs from 'node:fs/promises';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');

/**
 * Bundles the `den` CLI (src/cli/den.ts) once for the whole test run, so each test that starts it
 * runs plain JavaScript instead of compiling the sources through tsx again. Packages stay
 * external, and the file sits under the project's node_modules so that Node resolves them and the
 * runtime finds its package.json, as it does from the sources. Named by this process, so two runs
 * side by side never share one; the teardown removes it.
 */
export async function bundleDenCli(): Promise<string> {
  const dir = path.join(root, 'node_modules', '.cache', 'den-test');
  await fs.mkdir(dir, { recursive: true });
  const outfile = path.join(dir, `den-${process.pid}.js`);
  await build({
    entryPoints: [path.join(root, 'src', 'cli', 'den.ts')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: `node${process.versions.node.split('.')[0]}`,
    packages: 'external',
    outfile,
    logLevel: 'warning',
  });
  return outfile;
}
