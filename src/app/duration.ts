const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `60000`, `500ms`, `60s`, `5m`, `1h` or `1d` → milliseconds; anything else → undefined. */
export function parseDuration(value: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(value);
  if (!match) return undefined;
  const ms = Number(match[1]) * UNITS[match[2] ?? 'ms']!;
  return Number.isFinite(ms) ? Math.round(ms) : undefined;
}
