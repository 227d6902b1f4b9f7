/**
 * Settings are environment variables, each declared once in a zod shape keyed by the variable's
 * name. The platform, each feature, the cluster launcher and the CLI client declare their own
 * slice with `defineSettings`; the composition root checks every slice of the service at once.
 */
import { z } from 'zod';
import { parseDuration } from './duration';

export const bool = (fallback: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(fallback ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');

export const int = (fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce.number().int().min(min).max(max).default(fallback);

export const port = (fallback: number) => int(fallback, 0, 65535);

export const duration = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((value, ctx) => {
      const ms = parseDuration(value);
      if (ms === undefined) {
        ctx.addIssue({ code: 'custom', message: `"${value}" is not a duration (use 60000, 60s, 5m or 1h)` });
        return z.NEVER;
      }
      return ms;
    });

export const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

/** One slice of the environment: the variables it reads, and the settings object built from them. */
export interface SettingsSlice<S, Shape extends z.ZodRawShape = z.ZodRawShape> {
  /** Keyed by variable name: what the slice reads. Another slice may spread it into its own. */
  shape: Shape;
  /** Shapes checked values into settings; a slice that embeds this one calls it on its values. */
  build(values: z.output<z.ZodObject<Shape>>): S;
  /** Every problem of this slice, or its settings. */
  parse(environment: Environment): { ok: true; settings: S } | { ok: false; problems: string[] };
}

export type Environment = Record<string, string | undefined>;

/**
 * `check` states rules across variables (e.g. one that production requires), each problem as
 * `VARIABLE: what is wrong`.
 */
export function defineSettings<Shape extends z.ZodRawShape, S>(
  shape: Shape,
  build: (values: z.output<z.ZodObject<Shape>>) => S,
  check: (values: z.output<z.ZodObject<Shape>>) => string[] = () => [],
): SettingsSlice<S, Shape> {
  const schema = z.object(shape);
  return {
    shape,
    build,
    parse(environment) {
      const known: Environment = {};
      // An empty value counts as unset.
      for (const key of Object.keys(shape)) known[key] = environment[key] === '' ? undefined : environment[key];
      const result = schema.safeParse(known);
      if (!result.success) {
        return { ok: false, problems: result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`) };
      }
      const values = result.data as z.output<z.ZodObject<Shape>>;
      const problems = check(values);
      return problems.length > 0 ? { ok: false, problems } : { ok: true, settings: build(values) };
    },
  };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Parses one slice on its own (the cluster launcher, the CLI client); every problem at once. */
export function parseSettings<S>(slice: SettingsSlice<S>, environment: Environment): S {
  const result = slice.parse(environment);
  if (!result.ok) throw new ConfigError(result.problems);
  return result.settings;
}
