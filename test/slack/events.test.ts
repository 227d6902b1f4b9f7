/**
 * Slack events over real HTTP, every answer the route gives, on both the Slack path and the
 * neutral `chatplatform` alias, with a real worker, Temporal and Postgres.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { disableSlackConnection } from '../../src/slack/connections';
import { slackSearchAttributes, slackEventStateQuery, slackEventWorkflowId } from '../../src/slack/contract';
import { QUOTA_WINDOW_MS } from '../../src/slack/quota';
import { windowStart } from '../../src/app/store/window-counter';
import { createTestOrg } from '../harness/identity';
import {
  appMention,
  createTestSlackConnection,
  eventEnvelope,
  newSlackUserId,
  postSlackEvent,
  slackSignatureHeaders,
  startFakeSlack,
  type FakeSlack,
  type TestSlackConnection,
} from '../harness/slack';
import { startTestStack, type TestStack } from '../harness/stack';
import { waitFor } from '../harness/wait';
import { MAX_JSON_DEPTH } from '../../src/app/http/json-depth';

let stack: TestStack;
let slack: FakeSlack;
let organizationId: string;

beforeAll(async () => {
  slack = await startFakeSlack();
  stack = await startTestStack({ worker: true, env: { SLACK_API_BASE_URL: slack.url, SLACK_LINK_WAIT: '20s' } });
  organizationId = (await createTestOrg(stack.services.database.db)).organizationId;
});
afterAll(async () => {
  await stack.stop();
  await slack.close();
});

const newConnection = (options: Parameters<typeof createTestSlackConnection>[3] = {}) =>
  createTestSlackConnection(stack.services.database.db, stack.services.secretKey, organizationId, { botToken: null, ...options });

async function workflowExists(connectionId: string, eventId: string): Promise<boolean> {
  try {
    await stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connectionId, eventId)).describe();
    return true;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

async function metricsText(): Promise<string> {
  return (await stack.request('GET', '/metrics')).text;
}

describe.each(['slack', 'chatplatform'] as const)('POST /v1/integrations/%s/{connectionId}/events', (provider) => {
  let connection: TestSlackConnection;
  const path = (id: string) => `/v1/integrations/${provider}/${id}/events`;
  const post = (body: unknown, options: { headers?: Record<string, string>; raw?: string; to?: TestSlackConnection } = {}) =>
    postSlackEvent(stack, options.to ?? connection, body, { provider, headers: options.headers, raw: options.raw });

  beforeAll(async () => {
    connection = await newConnection();
  });

  it('200 {challenge} for url_verification', async () => {
    const res = await post({ token: 'x', challenge: 'ch4llenge-3x4mple', type: 'url_verification' });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ challenge: 'ch4llenge-3x4mple' });
  });

  it('200 {ok:true} for a supported event, after its workflow has started', async () => {
    const envelope = eventEnvelope(connection, appMention(newSlackUserId()));
    const res = await post(envelope);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true });
    // The ack came after the start: the workflow is there the moment we look.
    expect(await workflowExists(connection.connectionId, envelope.event_id)).toBe(true);
    const description = await stack.services.temporal.client.workflow
      .getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id))
      .describe();
    expect(description.type).toBe('slackEvent');
    expect(description.taskQueue).toBe(stack.services.temporal.taskQueue);
  });

  it('200 {ok:true} for an envelope without event or event_id, nothing started', async () => {
    for (const body of [
      { type: 'event_callback', team_id: connection.teamId, api_app_id: connection.appId, event_id: `Ev${randomUUID()}` },
      { type: 'app_rate_limited', team_id: connection.teamId, api_app_id: connection.appId, minute_rate_limited: 1 },
      { ...eventEnvelope(connection, appMention('U1')), event_id: undefined },
    ]) {
      const res = await post(body);
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ ok: true });
    }
  });

  it('200 {ok:true} for an ineligible event, not routed, reason in metrics and a debug log', async () => {
    const envelope = eventEnvelope(connection, { ...appMention(newSlackUserId()), bot_id: 'B0BOT' });
    const res = await post(envelope);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true });
    expect(await workflowExists(connection.connectionId, envelope.event_id)).toBe(false);
    expect(await metricsText()).toMatch(
      /den_ingress_outcomes_total\{route="\/v1\/integrations\/slack\/\{connectionId\}\/events",outcome="ineligible",reason="bot_sender"\} [1-9]/,
    );
    expect(stack.logs).toContainEqual(
      expect.objectContaining({ level: 20, msg: 'slack event not routed', eventId: envelope.event_id, reason: 'bot_sender' }),
    );
  });

  it('200 {ok:true} on a disabled connection, not routed', async () => {
    const disabled = await newConnection({ enabled: false });
    const envelope = eventEnvelope(disabled, appMention(newSlackUserId()));
    const res = await post(envelope, { to: disabled });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true });
    expect(await workflowExists(disabled.connectionId, envelope.event_id)).toBe(false);
    expect(stack.logs).toContainEqual(expect.objectContaining({ eventId: envelope.event_id, reason: 'connection_disabled' }));
  });

  it.each([
    ['wrong prefix', 'emx_01h2xcejqtf2nbrexx3vqjhp41'],
    ['too short', 'emc_01h2xcejqtf2nbrexx3vqjhp4'],
    ['too long', 'emc_01h2xcejqtf2nbrexx3vqjhp411'],
    ['excluded letter', 'emc_01h2xcejqtf2nbrexx3vqjhpl1'],
    ['first char above 7', 'emc_81h2xcejqtf2nbrexx3vqjhp41'],
    ['upper case', 'emc_01H2XCEJQTF2NBREXX3VQJHP41'],
  ])('400 InvalidRequestError for a bad connectionId (%s)', async (_name, id) => {
    const raw = JSON.stringify({ type: 'url_verification', challenge: 'c' });
    const res = await stack.request('POST', path(id), {
      raw,
      headers: { 'content-type': 'application/json', ...slackSignatureHeaders('x', raw) },
    });
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('invalid_request');
    expect(res.json.details[0].path).toEqual(['connectionId']);
    expect(typeof res.json.details[0].message).toBe('string');
  });

  it('400 for a signed body that is not JSON', async () => {
    const res = await post(undefined, { raw: 'this is { not json' });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: 'invalid_request', details: [{ message: 'Body is not valid JSON.', path: [] }] });
  });

  it(`400 with the path for a signed envelope nested deeper than ${MAX_JSON_DEPTH} levels`, async () => {
    const deep = `{"type":"event_callback","event":${'{"a":'.repeat(MAX_JSON_DEPTH - 1)}{}${'}'.repeat(MAX_JSON_DEPTH - 1)}}`;
    const res = await post(undefined, { raw: deep });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({
      error: 'invalid_request',
      details: [{ message: expect.any(String), path: ['event', ...Array<string>(MAX_JSON_DEPTH - 1).fill('a')] }],
    });
  });

  it('400 for signed JSON that is not an envelope', async () => {
    for (const [raw, at] of [
      ['[1,2]', []],
      ['"text"', []],
      ['{"event_id":"Ev1","team_id":"T1"}', ['type']],
      ['{"type":"url_verification"}', ['challenge']],
    ] as const) {
      const res = await post(undefined, { raw });
      expect(res.status).toBe(400);
      expect(res.json.error).toBe('invalid_request');
      expect(res.json.details[0].path).toEqual(at);
    }
  });

  it('401 {ok:false} for an unknown installation', async () => {
    const unknown = { ...connection, connectionId: 'emc_01h2xcejqtf2nbrexx3vqjhp41' };
    const res = await post({ type: 'url_verification', challenge: 'c' }, { to: unknown });
    expect(res.status).toBe(401);
    expect(res.json).toEqual({ ok: false });
  });

  it('401 {ok:false} for a bad or stale signature, counted as a signature failure', async () => {
    const body = JSON.stringify({ type: 'url_verification', challenge: 'c' });
    const wrongSecret = await stack.request('POST', path(connection.connectionId), {
      raw: body,
      headers: { 'content-type': 'application/json', ...slackSignatureHeaders('not-the-secret', body) },
    });
    expect(wrongSecret.status).toBe(401);
    expect(wrongSecret.json).toEqual({ ok: false });
    const stale = await stack.request('POST', path(connection.connectionId), {
      raw: body,
      headers: {
        'content-type': 'application/json',
        ...slackSignatureHeaders(connection.signingSecret, body, Math.floor(Date.now() / 1000) - 301),
      },
    });
    expect(stale.status).toBe(401);
    expect(stale.json).toEqual({ ok: false });
    const unsigned = await stack.request('POST', path(connection.connectionId), {
      raw: body,
      headers: { 'content-type': 'application/json' },
    });
    expect(unsigned.status).toBe(401);
    expect(unsigned.json).toEqual({ ok: false });
    const text = await metricsText();
    expect(text).toMatch(
      /den_signature_failures_total\{route="\/v1\/integrations\/slack\/\{connectionId\}\/events",reason="mismatch"\} [1-9]/,
    );
    expect(text).toMatch(
      /den_signature_failures_total\{route="\/v1\/integrations\/slack\/\{connectionId\}\/events",reason="stale_timestamp"\} [1-9]/,
    );
  });

  it('401 before 400: an unsigned non-JSON body is a signature failure', async () => {
    const res = await stack.request('POST', path(connection.connectionId), {
      raw: 'not json',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(401);
    expect(res.json).toEqual({ ok: false });
  });

  it('403 {ok:false} when team_id or api_app_id differs from the installation', async () => {
    const event = appMention(newSlackUserId());
    const otherTeam = await post({ ...eventEnvelope(connection, event), team_id: 'TOTHERTEAM' });
    expect(otherTeam.status).toBe(403);
    expect(otherTeam.json).toEqual({ ok: false });
    const otherApp = await post({ ...eventEnvelope(connection, event), api_app_id: 'AOTHERAPP' });
    expect(otherApp.status).toBe(403);
    expect(otherApp.json).toEqual({ ok: false });
    const noTeam = await post({ ...eventEnvelope(connection, event), team_id: undefined });
    expect(noTeam.status).toBe(403);
    expect(noTeam.json).toEqual({ ok: false });
  });

  it('url_verification is answered before the team check (Slack sends it without team_id)', async () => {
    const res = await post({ type: 'url_verification', challenge: 'first', team_id: 'TSOMEONEELSE' });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ challenge: 'first' });
  });

  it('413 with a plain-text body over 1,000,000 bytes, checked before the installation', async () => {
    const raw = JSON.stringify({ type: 'event_callback', pad: 'x'.repeat(1_000_001) });
    const res = await stack.request('POST', path('emc_01h2xcejqtf2nbrexx3vqjhp41'), {
      raw,
      headers: { 'content-type': 'application/json', ...slackSignatureHeaders('x', raw) },
    });
    expect(res.status).toBe(413);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toBe('Payload too large: the limit is 1000000 bytes.');
    expect(res.json).toBeUndefined();
  });

  it('accepts a body of exactly 1,000,000 bytes', async () => {
    const head = JSON.stringify({ type: 'event_callback', team_id: connection.teamId, api_app_id: connection.appId, pad: '' });
    const raw = head.replace('"pad":""', `"pad":"${'x'.repeat(1_000_000 - head.length)}"`);
    expect(Buffer.byteLength(raw)).toBe(1_000_000);
    const res = await post(undefined, { raw });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true });
  });

  it('400 for the connectionId before 413 for the size', async () => {
    const raw = 'x'.repeat(1_000_001);
    const res = await stack.request('POST', path('nope'), { raw, headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(res.json.details[0].path).toEqual(['connectionId']);
  });
});

describe('retries and dedupe', () => {
  it('three deliveries of one event_id, the first two concurrent, start exactly one workflow', async () => {
    const connection = await newConnection();
    const envelope = eventEnvelope(connection, appMention(newSlackUserId()));
    const before = await metricsText();
    const count = (text: string, outcome: string) =>
      Number(
        new RegExp(
          `den_ingress_outcomes_total\\{route="/v1/integrations/slack/\\{connectionId\\}/events",outcome="${outcome}",reason="app_mention"\\} (\\d+)`,
        ).exec(text)?.[1] ?? 0,
      );
    const [first, second] = await Promise.all([
      postSlackEvent(stack, connection, envelope),
      postSlackEvent(stack, connection, envelope, { headers: { 'x-slack-retry-num': '1', 'x-slack-retry-reason': 'http_timeout' } }),
    ]);
    const third = await postSlackEvent(stack, connection, envelope, {
      headers: { 'x-slack-retry-num': '2', 'x-slack-retry-reason': 'http_error' },
    });
    for (const res of [first, second, third]) {
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ ok: true });
    }
    const workflowId = slackEventWorkflowId(connection.connectionId, envelope.event_id);
    const list = async () => {
      const ids: string[] = [];
      for await (const execution of stack.services.temporal.client.workflow.list({ query: `WorkflowId = '${workflowId}'` }))
        ids.push(execution.runId);
      return ids;
    };
    const runs = await waitFor(
      async () => {
        const ids = await list();
        return ids.length > 0 ? ids : undefined;
      },
      10_000,
      { what: 'visibility' },
    );
    expect(runs).toHaveLength(1);
    const after = await metricsText();
    expect(count(after, 'enqueued') - count(before, 'enqueued')).toBe(1);
    expect(count(after, 'duplicate') - count(before, 'duplicate')).toBe(2);
  });

  it('a retry after the workflow has finished is still a duplicate, not a second run', async () => {
    const connection = await newConnection();
    const envelope = eventEnvelope(connection, { type: 'app_uninstalled' });
    expect((await postSlackEvent(stack, connection, envelope)).json).toEqual({ ok: true });
    const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
    await handle.result();
    const firstRunId = (await handle.describe()).runId;
    const retry = await postSlackEvent(stack, connection, envelope, { headers: { 'x-slack-retry-num': '3' } });
    expect(retry.status).toBe(200);
    expect(retry.json).toEqual({ ok: true });
    expect((await handle.describe()).runId).toBe(firstRunId);
  });
});

describe('lifecycle events', () => {
  it.each(['app_uninstalled', 'tokens_revoked'])('%s disables the connection through the workflow', async (type) => {
    const connection = await newConnection();
    const envelope = eventEnvelope(connection, type === 'tokens_revoked' ? { type, tokens: { bot: [connection.botUserId] } } : { type });
    const res = await postSlackEvent(stack, connection, envelope);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true });
    const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
    const result = await handle.result();
    expect(result).toMatchObject({ status: 'connection_disabled', detail: type });
    const row = await stack.services.database.db
      .selectFrom('slack_connections')
      .select(['enabled', 'disabled_reason'])
      .where('id', '=', connection.connectionId)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ enabled: false, disabled_reason: type });
    const description = await handle.describe();
    expect(description.typedSearchAttributes.get(slackSearchAttributes.SlackEventStatus)).toBe('connection_disabled');

    // From now on invocations are acknowledged and not routed.
    const mention = eventEnvelope(connection, appMention(newSlackUserId()));
    expect((await postSlackEvent(stack, connection, mention)).json).toEqual({ ok: true });
    expect(await workflowExists(connection.connectionId, mention.event_id)).toBe(false);
  });

  it('a lifecycle event still counts on an already disabled connection', async () => {
    const connection = await newConnection();
    await disableSlackConnection(stack.services.database.db, { connectionId: connection.connectionId, reason: 'operator' });
    const envelope = eventEnvelope(connection, { type: 'app_uninstalled' });
    expect((await postSlackEvent(stack, connection, envelope)).json).toEqual({ ok: true });
    expect(await workflowExists(connection.connectionId, envelope.event_id)).toBe(true);
  });
});

describe('the workflow records who asked', () => {
  it('sets ConnectionId and SlackUserId search attributes and answers its state query', async () => {
    const connection = await newConnection();
    const user = newSlackUserId();
    const envelope = eventEnvelope(connection, appMention(user));
    await postSlackEvent(stack, connection, envelope);
    const handle = stack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, envelope.event_id));
    const description = await handle.describe();
    expect(description.typedSearchAttributes.get(slackSearchAttributes.ConnectionId)).toBe(connection.connectionId);
    expect(description.typedSearchAttributes.get(slackSearchAttributes.SlackUserId)).toBe(user);
    // No link for this user: the invocation waits for one.
    await waitFor(async () => (await handle.query(slackEventStateQuery)).status === 'awaiting_link', 10_000, { what: 'awaiting_link' });
    await handle.terminate('test done');
  });
});

describe('quotas', () => {
  let quotaStack: TestStack;
  beforeAll(async () => {
    // No worker: only the front door's decision matters here. Quotas count in fixed windows: a
    // clock frozen mid-window keeps the five mentions in one (signatures allow it ±300 s).
    const midWindow = windowStart(Date.now(), QUOTA_WINDOW_MS) + QUOTA_WINDOW_MS / 2;
    quotaStack = await startTestStack({
      env: { SLACK_WORKSPACE_QUOTA_PER_MINUTE: '3', SLACK_USER_QUOTA_PER_MINUTE: '2' },
      now: () => midWindow,
    });
  });
  afterAll(() => quotaStack.stop());

  it('acknowledges but does not route over the per-user and per-workspace quotas', async () => {
    const connection = await createTestSlackConnection(quotaStack.services.database.db, quotaStack.services.secretKey, organizationId, {
      botToken: null,
    });
    const [u1, u2, u3] = [newSlackUserId(), newSlackUserId(), newSlackUserId()];
    const send = async (user: string) => {
      const envelope = eventEnvelope(connection, appMention(user));
      const res = await postSlackEvent(quotaStack, connection, envelope);
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ ok: true });
      return envelope.event_id;
    };
    const routed = async (eventId: string) => {
      try {
        await quotaStack.services.temporal.client.workflow.getHandle(slackEventWorkflowId(connection.connectionId, eventId)).describe();
        return true;
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) return false;
        throw error;
      }
    };
    expect(await routed(await send(u1))).toBe(true);
    expect(await routed(await send(u1))).toBe(true);
    expect(await routed(await send(u1))).toBe(false); // user quota (2)
    expect(await routed(await send(u2))).toBe(true); // workspace at 3
    expect(await routed(await send(u3))).toBe(false); // workspace quota (3)
    const text = (await quotaStack.request('GET', '/metrics')).text;
    expect(text).toMatch(/outcome="ineligible",reason="user_quota"\} 1/);
    expect(text).toMatch(/outcome="ineligible",reason="workspace_quota"\} 1/);
  });
});
