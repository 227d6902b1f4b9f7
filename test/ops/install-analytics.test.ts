/**
 * `npm install` sends no analytics: swagger-ui-dist depends on @scarf/scarf, whose postinstall
 * reports the install unless the root package.json opts out: Scarf reads
 * `scarfSettings.enabled === false` there (node_modules/@scarf/scarf/README.md, the FAQ "how can
 * I opt out of analytics?"). `allowScripts` denies its install script as well.
 */
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');
const read = (file: string) => JSON.parse(fs.readFileSync(path.join(root, file), 'utf8'));
const pkg = read('package.json') as { scarfSettings?: { enabled?: unknown }; allowScripts?: Record<string, unknown> };

it('opts out of Scarf in package.json', () => {
  expect(pkg.scarfSettings?.enabled).toBe(false);
});

it("denies @scarf/scarf's install script in allowScripts", () => {
  expect(pkg.allowScripts?.['@scarf/scarf']).toBe(false);
});

it('is still needed: @scarf/scarf, with its install script, is in the locked tree', () => {
  const lock = read('package-lock.json') as { packages: Record<string, { hasInstallScript?: boolean }> };
  expect(lock.packages['node_modules/@scarf/scarf']?.hasInstallScript).toBe(true);
});
