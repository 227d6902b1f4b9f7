/**
 * Where the CPU goes during a bench phase, per process: user + system time
 * of each part's process tree, read from /proc. Postgres serves each connection from a process of
 * its own, so a part's time includes its descendants.
 */
import fs from 'node:fs/promises';

/** Linux reports times in clock ticks of 1/100 s (`getconf CLK_TCK` is 100 on x86-64 and arm64). */
const TICKS_PER_SECOND = 100;

interface ProcStat {
  pid: number;
  ppid: number;
  ticks: number;
}

async function readStats(): Promise<ProcStat[]> {
  const entries = await fs.readdir('/proc').catch(() => [] as string[]);
  const stats = await Promise.all(
    entries
      .filter((name) => /^\d+$/.test(name))
      .map(async (name) => {
        const text = await fs.readFile(`/proc/${name}/stat`, 'utf8').catch(() => undefined);
        if (!text) return undefined;
        // The command name, in parentheses, may hold spaces: fields are counted after its last ')'.
        const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
        // After the name: state(3) ppid(4) … utime(14) stime(15) cutime(16) cstime(17), numbered
        // from pid(1). The children's times count the ones that exited and were reaped (a Postgres
        // backend whose connection closed): their time moves there rather than vanishing.
        const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
        return { pid: Number(name), ppid: Number(fields[1]), ticks };
      }),
  );
  return stats.filter((s): s is ProcStat => s !== undefined);
}

function treeTicks(stats: ProcStat[], roots: number[]): number {
  const children = new Map<number, number[]>();
  for (const s of stats) children.set(s.ppid, [...(children.get(s.ppid) ?? []), s.pid]);
  const byPid = new Map(stats.map((s) => [s.pid, s.ticks]));
  let total = 0;
  const pending = [...roots];
  const seen = new Set<number>();
  while (pending.length) {
    const pid = pending.pop()!;
    if (seen.has(pid)) continue;
    seen.add(pid);
    total += byPid.get(pid) ?? 0;
    pending.push(...(children.get(pid) ?? []));
  }
  return total;
}

/** CPU seconds of each named group of process trees; `bench` is this process itself. */
async function cpuSeconds(parts: Record<string, number[]>): Promise<Record<string, number>> {
  const stats = await readStats();
  const result: Record<string, number> = {};
  for (const [name, pids] of Object.entries(parts)) result[name] = treeTicks(stats, pids) / TICKS_PER_SECOND;
  return result;
}

/** Starts a measurement; the function it returns gives each part's share of one core, in percent. */
export async function measureCpu(parts: Record<string, number[]>): Promise<() => Promise<Record<string, number>>> {
  const before = await cpuSeconds(parts);
  const started = performance.now();
  return async () => {
    const after = await cpuSeconds(parts);
    const wall = (performance.now() - started) / 1000;
    return Object.fromEntries(Object.keys(parts).map((name) => [name, Math.round((100 * (after[name]! - before[name]!)) / wall)]));
  };
}
