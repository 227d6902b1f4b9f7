/**
 * What `den runtime` reads from the environment: where the API is, and the key it calls it with.
 * The runtime is a client of the API, not part of the service, so it parses only these two
 * variables and never the service's config (src/app/config.ts): a service variable it does not
 * use cannot stop it. An empty variable counts as unset, as in the service's config.
 */
import { z } from 'zod';
import { CliError } from '../context';

export const runtimeEnvSchema = z.object({
  DEN_API_URL: z.string().url().default('http://127.0.0.1:8080'),
  DEN_API_KEY: z
    .string()
    .optional()
    .transform((v) => (v === undefined || v.trim() === '' ? undefined : v)),
});

export interface RuntimeSettings {
  apiUrl: string;
  apiKey: string | undefined;
}

/** Parses an environment (process.env by default); every problem is reported at once. */
export function loadRuntimeSettings(env: Record<string, string | undefined> = process.env): RuntimeSettings {
  const known: Record<string, string | undefined> = {};
  for (const key of Object.keys(runtimeEnvSchema.shape)) known[key] = env[key] === '' ? undefined : env[key];
  const result = runtimeEnvSchema.safeParse(known);
  if (!result.success) {
    const problems = result.error.issues.map((i) => `  - ${i.path.join('.') || '(root)'}: ${i.message}`);
    throw new CliError(`Invalid configuration:\n${problems.join('\n')}`);
  }
  return { apiUrl: result.data.DEN_API_URL, apiKey: result.data.DEN_API_KEY };
}
