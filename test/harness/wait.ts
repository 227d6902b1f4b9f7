/**
 * Polls `fn` until it returns something other than undefined/false, or fails after `timeoutMs`
 * with the last error it saw. Every wait in the tests and the bench is bounded by this.
 */
export async function waitFor<T>(
  fn: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 10_000,
  options: { intervalMs?: number; what?: string } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await fn();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      const why = last ? `: ${(last as Error)?.message ?? String(last)}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${options.what ?? 'a condition'}${why}`);
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 50));
  }
}
