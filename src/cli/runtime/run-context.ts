/**
 * What a run was asked in its conversation, handed to the command as a file: `DEN_RUN_CONTEXT`
 * names a JSON file holding `{input, context}`, the run's input (its text) and the thread's earlier
 * messages, oldest first (`[]` when it has none). Its standard input stays the text alone, so a
 * command that reads only stdin works as before. The file is private to the runtime's user (0600,
 * in a directory of its own) and removed once the command has exited.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { RunSummary } from '../../runs/contract';

export interface RunContextFile {
  /** The file's path, for DEN_RUN_CONTEXT. */
  path: string;
  remove(): Promise<void>;
}

export async function writeRunContext(run: Pick<RunSummary, 'input'>): Promise<RunContextFile> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'den-run-'));
  const file = path.join(dir, 'context.json');
  const { context = [], ...input } = run.input ?? { text: '' };
  await fs.writeFile(file, `${JSON.stringify({ input, context })}\n`, { mode: 0o600 });
  return { path: file, remove: () => fs.rm(dir, { recursive: true, force: true }) };
}
