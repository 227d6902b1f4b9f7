import fs from 'node:fs/promises';

export default async function globalTeardown(): Promise<void> {
  const state = globalThis as { __denTestStops?: (() => Promise<void>)[]; __denTestDataDir?: string };
  for (const stop of (state.__denTestStops ?? []).reverse()) await stop().catch(() => undefined);
  if (state.__denTestDataDir) await fs.rm(state.__denTestDataDir, { recursive: true, force: true });
}
