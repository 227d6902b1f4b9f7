/**
 * The service's configuration: the platform's slice (src/app/config.ts) and every feature's
 * (`settings` in its descriptor), read from one environment and checked at once, so every
 * invalid or missing value is reported in one message. This module and the slices the cluster
 * launcher and the CLI client parse for themselves are the only readers of the environment.
 */
import { z } from 'zod';
import { platformSettings, type PlatformConfig } from '../app/config';
import type { Feature } from '../app/feature';
import { ConfigError, parseSettings, type Environment, type SettingsSlice } from '../app/settings';
import { FEATURES, type FeatureList } from './features';

type Features = FeatureList[number];
type SettingsOf<F> = F extends { settings?: SettingsSlice<infer S> } ? S : never;

/** Each feature's settings under its name (features without settings have none). */
type FeatureSettings = { [F in Features as unknown extends SettingsOf<F> ? never : F['name']]: SettingsOf<F> };

export type Config = PlatformConfig & FeatureSettings;

/** Every variable the service reads, keyed by name (the docs and the compose file are checked against it). */
export const envSchema = z.object(
  Object.assign({}, platformSettings.shape, ...FEATURES.map((feature) => feature.settings?.shape ?? {})) as z.ZodRawShape,
);

/** Parses an environment (process.env by default). Every problem is reported at once. */
export function loadConfig(environment: Environment = process.env): Config {
  const problems: string[] = [];
  const parsed: Record<string, unknown> = {};
  const platform = platformSettings.parse(environment);
  if (!platform.ok) problems.push(...platform.problems);
  for (const feature of FEATURES) {
    const result = feature.settings?.parse(environment);
    if (result?.ok === false) problems.push(...result.problems);
    else if (result?.ok) parsed[feature.name] = result.settings;
  }
  if (!platform.ok || problems.length > 0) throw new ConfigError([...new Set(problems)]);
  return { ...platform.settings, ...parsed } as Config;
}

/** The process environment with some variables replaced (tests, the bench and chaos scripts). */
export function loadConfigWith(overrides: Record<string, string | undefined>): Config {
  return loadConfig({ ...process.env, ...overrides });
}

/** One feature's settings on their own (a `den` command's), without checking the others' slices. */
export function featureSettings<S>(feature: Feature<S>, environment: Environment = process.env): S {
  return (feature.settings ? parseSettings(feature.settings, environment) : undefined) as S;
}
