/**
 * temporalCall against the real Temporal dev server: a payload the data converter cannot
 * serialise is a bug in the caller (an error the error mapper answers 500), never a Temporal
 * outage (503 with Retry-After, counted in den_temporal_client_errors_total).
 */
import { randomUUID } from 'node:crypto';
import { AppError } from '../../src/app/errors';
import { isConversionFailure, temporalCall } from '../../src/app/temporal/client';
import { startTestStack, type TestStack } from '../harness/stack';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack();
});
afterAll(() => stack.stop());

/** Built without recursion: an object `levels` deep. */
const deep = (levels: number): Record<string, unknown> => {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) value = { a: value };
  return value;
};

const startWith = (arg: unknown) => () =>
  stack.services.temporal.client.workflow.start('ping', {
    args: [arg],
    taskQueue: stack.services.temporal.taskQueue,
    workflowId: `conversion-${randomUUID()}`,
  });

const counted = async () => (await stack.services.metrics.temporalErrors.get()).values.reduce((sum, v) => sum + v.value, 0);

it.each([
  ['nested 20,000 levels deep', deep(20_000)],
  ['a BigInt', { n: 1n }],
])('a payload the converter cannot serialise (%s) is not reported as an outage', async (_label, arg) => {
  const before = await counted();
  const error = await temporalCall(
    stack.services.temporal,
    { operation: 'start', timeoutMs: 5000, metrics: stack.services.metrics },
    startWith(arg),
  ).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(Error);
  expect(error instanceof AppError && error.status === 503).toBe(false);
  expect(error).not.toBeInstanceOf(AppError);
  expect(isConversionFailure(error)).toBe(true);
  expect(await counted()).toBe(before);
});
