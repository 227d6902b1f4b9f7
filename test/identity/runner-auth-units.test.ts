/**
 * What the authenticator remembers of runner tokens to ride out a Postgres outage
 * (src/identity/runner-auth.ts), driven by a stand-in for the process's notification connection:
 * only tokens verified while it listens, forgotten at each announcement and whenever the
 * connection is opened again, kept when it is lost.
 */
import { AppError, errors } from '../../src/app/errors';
import { createMetrics } from '../../src/app/metrics';
import type { ChannelSubscriber, Channels } from '../../src/app/store/channels';
import { createRunnerTokenAuth } from '../../src/identity/runner-auth';
import type { ResolvedCredential } from '../../src/identity/store';

const TOKEN = `den_rt_${'a'.repeat(43)}`;
const AT = new Date(1_700_000_000_000);

function setup() {
  const line = { listening: true, subscriber: undefined as ChannelSubscriber | undefined };
  const channels: Channels = {
    subscribe(_channel, subscriber) {
      line.subscriber = subscriber;
      return {
        get listening() {
          return line.listening;
        },
        unsubscribe: () => undefined,
      };
    },
    close: async () => undefined,
  };
  let postgresUp = true;
  const found: ResolvedCredential = {
    hash: 'h',
    userId: 'usr',
    organizationId: 'org',
    memberId: 'mem',
    role: 'admin',
    expiresAt: new Date(AT.getTime() + 3_600_000),
    runner: { id: 'rnr_1', label: null },
  };
  const auth = createRunnerTokenAuth({ metrics: createMetrics({ defaultMetrics: false }), channels }, async () => {
    if (!postgresUp) throw errors.unavailable('postgres');
    return found;
  });
  return {
    line,
    outage: (down: boolean) => (postgresUp = !down),
    /** The principal's runner id, or the 503's dependency. */
    ask: async () =>
      auth(TOKEN, AT).then(
        (principal) => principal.runner?.id,
        (error: unknown) => (error instanceof AppError ? error.dependency : 'other'),
      ),
  };
}

it('answers from memory in an outage for a token verified while listening', async () => {
  const { ask, outage } = setup();
  expect(await ask()).toBe('rnr_1');
  outage(true);
  expect(await ask()).toBe('rnr_1');
});

it('forgets every token at an announcement', async () => {
  const { ask, outage, line } = setup();
  await ask();
  line.subscriber!.notified('');
  outage(true);
  expect(await ask()).toBe('postgres');
});

it('does not remember a token verified while not listening', async () => {
  const { ask, outage, line } = setup();
  line.listening = false;
  await ask();
  outage(true);
  expect(await ask()).toBe('postgres');
});

it('keeps what it remembered when the connection is lost, and forgets it when it is opened again', async () => {
  const { ask, outage, line } = setup();
  await ask();
  line.listening = false;
  line.subscriber!.reset();
  outage(true);
  expect(await ask()).toBe('rnr_1');
  outage(false);
  line.listening = true;
  line.subscriber!.reset();
  outage(true);
  expect(await ask()).toBe('postgres');
});
