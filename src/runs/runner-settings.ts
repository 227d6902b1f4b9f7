/**
 * What the service keeps about runtimes: how long a runner token lives, how long a runtime stays
 * online after it was last seen, and each member's breaker. Part of the runs feature's slice, and
 * exported for the features that ask whether a member's runtime is there (src/runs/index.ts).
 */
import { defineSettings, duration, int } from '../app/settings';

/** A duration setting of at least `minMs`. */
const atLeast = (fallback: string, minMs: number, min: string) => duration(fallback).refine((ms) => ms >= minMs, `must be at least ${min}`);

export const runnerSettings = defineSettings(
  {
    // A runner token's lifetime; `den runtime` renews its token before it ends.
    RUNNER_TOKEN_TTL: atLeast('12h', 10_000, '10s'),
    // A runtime is online while it long-polls a claim or heartbeats a run within this.
    RUNNER_PRESENCE_WINDOW: atLeast('60s', 1_000, '1s'),
    // Runtime failures of one member's runs within the window that open the member's breaker.
    RUNNER_BREAKER_FAILURES: int(5, 1, 1000),
    // How far back failures count, and how long the breaker stays open before a probe may run.
    RUNNER_BREAKER_WINDOW: atLeast('5m', 1_000, '1s'),
  },
  (e): RunnerSettings => ({
    tokenTtlMs: e.RUNNER_TOKEN_TTL,
    presenceWindowMs: e.RUNNER_PRESENCE_WINDOW,
    breaker: { failures: e.RUNNER_BREAKER_FAILURES, windowMs: e.RUNNER_BREAKER_WINDOW },
  }),
);

export interface RunnerSettings {
  tokenTtlMs: number;
  presenceWindowMs: number;
  breaker: { failures: number; windowMs: number };
}
