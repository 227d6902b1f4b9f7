/** `--env NAME=VALUE` pairs, as the bench's commands take them, into an environment for the API and worker processes. */
export function envOptions(pairs: string[]): Record<string, string> {
  return Object.fromEntries(
    pairs.map((pair) => {
      const at = pair.indexOf('=');
      if (at < 1) throw new Error(`--env ${pair}: expected NAME=VALUE`);
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
}
