/**
 * `npm run bench -- histories`: what one item costs the engine, read from the real
 * histories recorded in test/histories/ — the `before-<patch>-*` files ran on the code before
 * that patch, the others on today's. Every history event is a write to Temporal's persistence;
 * every workflow task is a round trip to a worker.
 */
import fs from 'node:fs/promises';
import path from 'node:path';

const DIR = path.resolve(__dirname, '../test/histories');

interface Cost {
  history: string;
  events: number;
  workflowTasks: number;
  activities: number;
  markers: number;
  timers: number;
  signals: number;
  updates: number;
}

const count = (types: string[], suffix: string) => types.filter((t) => t.endsWith(suffix)).length;

function costOf(history: string, eventTypes: string[]): Cost {
  return {
    history,
    events: eventTypes.length,
    workflowTasks: count(eventTypes, 'WORKFLOW_TASK_COMPLETED'),
    activities: count(eventTypes, 'ACTIVITY_TASK_SCHEDULED'),
    markers: count(eventTypes, 'MARKER_RECORDED'),
    timers: count(eventTypes, 'TIMER_STARTED'),
    signals: count(eventTypes, 'WORKFLOW_EXECUTION_SIGNALED'),
    updates: count(eventTypes, 'WORKFLOW_EXECUTION_UPDATE_ACCEPTED'),
  };
}

async function historyCosts(): Promise<Cost[]> {
  const files = (await fs.readdir(DIR)).filter((f) => f.endsWith('.json')).sort();
  return Promise.all(
    files.map(async (file) => {
      const { events } = JSON.parse(await fs.readFile(path.join(DIR, file), 'utf8')) as { events: { eventType: string }[] };
      return costOf(
        file.replace(/\.json$/, ''),
        events.map((e) => e.eventType),
      );
    }),
  );
}

export async function printHistoryCosts(): Promise<number> {
  const rows = await historyCosts();
  console.log('| history | events | workflow tasks | activities | markers | timers | signals | updates |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows)
    console.log(
      `| ${r.history} | ${r.events} | ${r.workflowTasks} | ${r.activities} | ${r.markers} | ${r.timers} | ${r.signals} | ${r.updates} |`,
    );
  return 0;
}
