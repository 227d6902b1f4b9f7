/**
 * Per-process sliding-window quotas for Slack invocations: per workspace (600/min by default)
 * and per Slack user (10/min). A flood from one workspace or user is acknowledged (Slack must
 * not retry it) but not routed. Per process on purpose: it protects this process's Temporal
 * budget, needs no coordination, and N API processes simply allow N times the rate.
 */
import type { Config } from '../app/config';

export interface QuotaCheck {
  key: string;
  limit: number;
}

export type QuotaVerdict = { ok: true; release: () => void } | { ok: false; key: string };

export class SlidingWindowQuota {
  private readonly hits = new Map<string, number[]>();
  private calls = 0;

  constructor(private readonly windowMs = 60_000) {}

  /**
   * Takes one unit from every key, or from none when any is full (so a user over their own
   * limit does not eat the workspace's budget). `release` gives the units back, for an event
   * that turned out not to be routed after all (a duplicate delivery, a failed enqueue).
   */
  tryTake(checks: QuotaCheck[], now: number): QuotaVerdict {
    if (++this.calls % 1000 === 0) this.sweep(now);
    for (const check of checks) {
      if (this.live(check.key, now).length >= check.limit) return { ok: false, key: check.key };
    }
    for (const check of checks) this.live(check.key, now).push(now);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        for (const check of checks) {
          const list = this.hits.get(check.key);
          const at = list?.lastIndexOf(now) ?? -1;
          if (list && at >= 0) list.splice(at, 1);
        }
      },
    };
  }

  /** How many units the key holds in the current window (for tests and debugging). */
  used(key: string, now: number): number {
    return this.live(key, now).length;
  }

  private live(key: string, now: number): number[] {
    let list = this.hits.get(key);
    if (!list) {
      list = [];
      this.hits.set(key, list);
    }
    // Timestamps are appended in order (one clock per process), so expired ones are a prefix.
    let expired = 0;
    while (expired < list.length && list[expired]! <= now - this.windowMs) expired++;
    if (expired > 0) list.splice(0, expired);
    return list;
  }

  private sweep(now: number): void {
    for (const [key, list] of this.hits) {
      if (list.length === 0 || list[list.length - 1]! <= now - this.windowMs) this.hits.delete(key);
    }
  }
}

export function slackQuotaChecks(config: Config, teamId: string, slackUserId: string): QuotaCheck[] {
  return [
    { key: `workspace:${teamId}`, limit: config.slack.workspaceQuotaPerMinute },
    { key: `user:${teamId}:${slackUserId}`, limit: config.slack.userQuotaPerMinute },
  ];
}
