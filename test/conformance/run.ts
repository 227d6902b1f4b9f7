/**
 * `npm run conformance [-- <extra schemathesis options>]`: schemathesis over the real stack's
 * `/openapi.json` (./schemathesis.ts), its output on the terminal and a JUnit report under
 * `.data/conformance/`. The exit code is schemathesis's: non-zero on any failure. `npm test`
 * runs the same check as `test/conformance/conformance.test.ts`.
 */
import { exitWith } from '../../bench/lib/exit';
import { reportDir, runConformance } from './schemathesis';

async function main(): Promise<number> {
  // Ctrl-C stops schemathesis (or skips it), and the stack is then stopped: nothing the run
  // started outlives it.
  const interrupted = new AbortController();
  const interrupt = () => interrupted.abort();
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);
  try {
    const result = await runConformance({
      output: 'inherit',
      log: (line) => console.log(line),
      extraArgs: ['--report', 'junit', '--report-dir', reportDir, ...process.argv.slice(2)],
      signal: interrupted.signal,
    });
    if (result.crashed) console.error(`the API crashed or logged an unhandled error:\n${result.apiOutput}`);
    console.log(`conformance: schemathesis exited ${result.code} after ${result.seconds.toFixed(1)} s`);
    return result.code !== 0 ? result.code : result.crashed ? 1 : 0;
  } finally {
    process.off('SIGINT', interrupt);
    process.off('SIGTERM', interrupt);
  }
}

exitWith(main());
