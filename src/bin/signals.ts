/**
 * SIGINT/SIGTERM handling shared by the entry points: the first signal starts a clean stop; a
 * second one, from a person pressing Ctrl-C again, gives up waiting.
 *
 * One Ctrl-C often arrives more than once: the terminal signals the whole foreground process
 * group, and `npm run` and the `tsx` CLI both forward the signal they got to their child as
 * well (tsx after waiting 30 ms for its child to confirm). A repeat within REPEAT_WINDOW_MS is
 * taken as that same Ctrl-C, not as a second one.
 */
const REPEAT_WINDOW_MS = 250;

export function onStopSignals(handlers: { stop: (signal: NodeJS.Signals) => void; force: (signal: NodeJS.Signals) => void }): void {
  let first: number | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    const now = Date.now();
    if (first === undefined) {
      first = now;
      handlers.stop(signal);
    } else if (now - first > REPEAT_WINDOW_MS) {
      handlers.force(signal);
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}
