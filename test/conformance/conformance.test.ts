/**
 * The OpenAPI document against the real server, by a tool the project did not write:
 * schemathesis with every check and phase (./schemathesis.ts). Its whole output goes to
 * `.data/conformance/schemathesis-<time>.log`; a failure prints the summary here. Run by
 * `npm run test:system` (one suite at a time: it brings up its own stack and takes minutes).
 */
import fs from 'node:fs';
import path from 'node:path';
import { reportDir, runConformance, testCaseCounts } from './schemathesis';

test(
  'schemathesis finds no failure in any operation of /openapi.json, and the API never crashes',
  async () => {
    fs.mkdirSync(reportDir, { recursive: true });
    const logFile = path.join(reportDir, `schemathesis-${new Date().toISOString().replace(/[:.]/g, '')}.log`);
    const fd = fs.openSync(logFile, 'w');
    const result = await runConformance({ output: fd, log: (line) => fs.writeSync(fd, `${line}\n`) }).finally(() => fs.closeSync(fd));
    const output = fs.readFileSync(logFile, 'utf8');
    const summary = output.slice(output.lastIndexOf('SUMMARY')).trim();
    const counts = testCaseCounts(output);
    console.log(
      `conformance: schemathesis exited ${result.code} after ${result.seconds.toFixed(0)} s; ${
        summary
          .split('\n')
          .find((l) => l.includes('generated'))
          ?.trim() ?? 'no test-case count'
      } (log: ${path.relative(process.cwd(), logFile)})`,
    );

    if (result.code !== 0 || result.crashed) console.error(`${summary}\n${result.apiOutput}`);

    expect(result.code).toBe(0);
    expect(result.crashed).toBe(false);
    expect(counts).toBeDefined();
    expect(counts!.failed).toBe(0);
    expect(counts!.passed).toBe(counts!.generated);
    // --max-examples 50 over 23 operations and four phases: thousands, not a handful.
    expect(counts!.generated).toBeGreaterThan(1000);
  },
  20 * 60_000,
);
