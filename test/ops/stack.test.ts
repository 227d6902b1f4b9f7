/**
 * Docker can't run here, so this checks what can be checked of the production stack: the YAML
 * parses, the services the README names exist, every variable passed is one the config schema
 * knows, the commands exist in package.json and the ports agree with the README.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { envSchema } from '../../src/app/config';

const root = path.resolve(__dirname, '../..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');

type Service = { command?: string[]; environment?: Record<string, unknown>; ports?: string[]; healthcheck?: unknown; depends_on?: Record<string, { condition: string }>; build?: unknown };
const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, Service>; volumes: Record<string, unknown> };
const readme = read('README.md');
const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
const knownVariables = new Set(Object.keys(envSchema.shape));

describe('docker-compose.yml', () => {
  it('has the five services the README names, each with a health check', () => {
    const names = ['postgres', 'temporal', 'temporal-ui', 'api', 'worker'];
    for (const name of names) {
      expect(compose.services).toHaveProperty(name);
      expect(compose.services[name]!.healthcheck).toBeDefined();
      expect(readme).toContain(`\`${name}\``);
    }
  });

  it('orders start-up with depends_on health conditions', () => {
    for (const name of ['temporal', 'api', 'worker']) {
      const deps = compose.services[name]!.depends_on ?? {};
      expect(Object.keys(deps).length).toBeGreaterThan(0);
      for (const dep of Object.values(deps)) expect(dep.condition).toBe('service_healthy');
    }
  });

  it.each(['api', 'worker'])('%s passes only variables the config schema knows', (name) => {
    const env = Object.keys(compose.services[name]!.environment ?? {});
    expect(env.length).toBeGreaterThan(5);
    expect(env.filter((key) => !knownVariables.has(key))).toEqual([]);
  });

  it('runs the API and worker through package.json scripts that exist', () => {
    expect(compose.services.api!.command).toEqual(['npm', 'run', 'serve']);
    expect(compose.services.worker!.command).toEqual(['npm', 'run', 'worker']);
    // Production runs the compiled build (npm run build), never TypeScript through tsx.
    expect(pkg.scripts.serve).toBe('node dist/src/bin/serve.js');
    expect(pkg.scripts.worker).toBe('node dist/src/bin/worker.js');
    expect(fs.existsSync(path.join(root, 'src/bin/serve.ts'))).toBe(true);
    expect(fs.existsSync(path.join(root, 'src/bin/worker.ts'))).toBe(true);
  });

  it('publishes the ports the README states: API 8080 (8081 for a second replica), Temporal UI 8233 → 8080', () => {
    expect(compose.services.api!.ports).toEqual(['8080-8081:8080']);
    expect(compose.services['temporal-ui']!.ports).toEqual(['8233:8080']);
    expect(readme).toMatch(/`api`.*`8080` \(`8081` for a second replica\)/);
    expect(readme).toMatch(/`temporal-ui`.*`8233`/);
  });

  it('hard-codes no secret: secrets come from .env, and .env.example lists them empty', () => {
    const text = read('docker-compose.yml');
    expect(text).toMatch(/SECRET_KEY: \$\{SECRET_KEY:\?/);
    expect(text).not.toMatch(/POSTGRES_PASSWORD: (?!\$\{)/);
    const example = read('.env.example');
    expect(example).toMatch(/^SECRET_KEY=$/m);
    expect(example).toMatch(/^GITHUB_WEBHOOK_SECRET=$/m);
  });

  it('uses named volumes for state', () => {
    expect(Object.keys(compose.volumes)).toEqual(expect.arrayContaining(['postgres-data', 'temporal-config']));
  });
});

describe('Dockerfile', () => {
  const dockerfile = read('Dockerfile');
  it('is multi-stage, ships production dependencies only, a prebuilt workflow bundle, and runs as non-root', () => {
    expect(dockerfile.match(/^FROM /gm)?.length).toBeGreaterThanOrEqual(2);
    expect(dockerfile).toContain('npm ci --omit=dev');
    expect(dockerfile).toContain('WORKFLOW_BUNDLE_PATH=/app/dist/workflow-bundle.js');
    expect(pkg.scripts.build).toContain('dist/workflow-bundle.js');
    expect(dockerfile).toMatch(/^USER node$/m);
  });
});

// That every variable of the config schema is documented (docs/configuration.md) is checked in
// test/docs/docs.test.ts, with the other checks of the docs against the code.
