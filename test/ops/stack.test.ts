/**
 * Docker can't run here, so this checks what can be checked of the production stack: the YAML
 * parses, the services the README names exist, every variable passed is one the config schema
 * knows, the commands are node on the entries package.json's scripts run (no npm in between)
 * and the ports agree with the README.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { envSchema } from '../../src/main/config';
import { loadClusterConfig } from '../../src/cluster/settings';
import { TEMPORAL_SERVER_VERSION } from '../../src/cluster/binaries';
import { TEMPORAL_DATABASES } from '../../src/cluster/postgres';
import { TEMPORAL_CONFIG_DIR } from '../../src/cluster/temporal-server';

const root = path.resolve(__dirname, '../..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');

type Service = {
  image?: string;
  command?: string[];
  entrypoint?: string[];
  environment?: Record<string, unknown>;
  ports?: string[];
  volumes?: string[];
  healthcheck?: unknown;
  depends_on?: Record<string, { condition: string }>;
  build?: unknown;
};
const compose = parse(read('docker-compose.yml'), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const readme = read('README.md');
const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string>; engines: { node: string } };
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

  it('orders start-up: schema, server, namespace, then the service, each step waiting for the last to be healthy or done', () => {
    const after = (name: string) =>
      Object.fromEntries(Object.entries(compose.services[name]!.depends_on ?? {}).map(([dep, { condition }]) => [dep, condition]));
    expect(after('temporal-schema')).toEqual({ postgres: 'service_healthy' });
    expect(after('temporal')).toEqual({ 'temporal-schema': 'service_completed_successfully' });
    expect(after('temporal-namespace')).toEqual({ temporal: 'service_healthy' });
    for (const name of ['api', 'worker']) {
      expect(after(name)).toEqual({ postgres: 'service_healthy', 'temporal-namespace': 'service_completed_successfully' });
    }
  });

  it('runs the Temporal server `npm run cluster` runs: same version, same config file, same shard count, a production image', () => {
    const temporal = compose.services.temporal!;
    expect(temporal.image).toBe(`temporalio/server:${TEMPORAL_SERVER_VERSION}`);
    expect(compose.services['temporal-schema']!.image).toMatch(
      new RegExp(`^temporalio/admin-tools:${TEMPORAL_SERVER_VERSION.replace(/\./g, '\\.')}-`),
    );
    expect(read('docker-compose.yml')).not.toContain('auto-setup:');
    // deploy/temporal, the directory src/cluster/temporal-server.ts starts the server with.
    expect(temporal.volumes).toContain(`./${path.relative(root, TEMPORAL_CONFIG_DIR)}:/etc/temporal/den:ro`);
    expect(temporal.command!.join(' ')).toContain('--config den --env cluster');
    expect(fs.existsSync(path.join(TEMPORAL_CONFIG_DIR, 'cluster.yaml'))).toBe(true);
    expect(String(temporal.environment!.TEMPORAL_HISTORY_SHARDS)).toBe(String(loadClusterConfig({}).cluster.historyShards));
    // Both read the same schema names the launcher migrates.
    const schemaScript = compose.services['temporal-schema']!.command!.join('\n');
    for (const database of TEMPORAL_DATABASES)
      expect(schemaScript).toContain(`--db ${database.name} update-schema --schema-name ${database.schema}`);
  });

  it.each(['api', 'worker'])('%s passes only variables the config schema knows', (name) => {
    const env = Object.keys(compose.services[name]!.environment ?? {});
    expect(env.length).toBeGreaterThan(5);
    expect(env.filter((key) => !knownVariables.has(key))).toEqual([]);
  });

  it('runs the API and worker as node on the compiled entries of the serve and worker scripts, without npm', () => {
    // npm between the container and node would stand in the way of SIGTERM (graceful shutdown).
    expect(compose.services.api!.command).toEqual(['node', 'dist/src/bin/serve.js']);
    expect(compose.services.worker!.command).toEqual(['node', 'dist/src/bin/worker.js']);
    expect(compose.services.api!.command!.join(' ')).toBe(pkg.scripts.serve);
    expect(compose.services.worker!.command!.join(' ')).toBe(pkg.scripts.worker);
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
    expect(Object.keys(compose.volumes)).toEqual(expect.arrayContaining(['postgres-data']));
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

  it('builds and runs on the Node line of package.json engines, the one the tests run on', () => {
    const major = /^\^(\d+)\./.exec(pkg.engines.node)?.[1];
    expect(major).toBe(process.versions.node.split('.')[0]);
    const images = [...dockerfile.matchAll(/^FROM (\S+) AS (\w+)$/gm)].map(([, image, stage]) => `${stage}: ${image}`);
    expect(images).toEqual([`build: node:${major}-bookworm-slim`, `runtime: node:${major}-bookworm-slim`]);
  });

  it('runs node on the compiled API entry directly, in exec form (node gets the signals, not npm or a shell)', () => {
    const cmds = dockerfile.match(/^CMD .*$/gm) ?? [];
    expect(cmds).toEqual(['CMD ["node", "dist/src/bin/serve.js"]']);
    expect(pkg.scripts.serve).toBe('node dist/src/bin/serve.js');
    expect(dockerfile).not.toMatch(/^(CMD|ENTRYPOINT) .*\bnpm\b/m);
  });
});

// That every variable of the config schema is documented (docs/configuration.md) is checked in
// test/docs/docs.test.ts, with the other checks of the docs against the code.
