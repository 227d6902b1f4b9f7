/**
 * The steps the Slack routes share: find the installation and verify the signature (checks 3
 * and 4 of the behaviour notes), and the durable enqueue of an event.
 */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { errors } from '../app/errors';
import type { AppContext } from '../app/http/context';
import type { Services } from '../app/http/services';
import { temporalCall } from '../app/temporal/client';
import { slackEvent } from '../../workflows/slack';
import { slackSearchAttributes, slackEventWorkflowId, type SlackEventInput } from './contract';
import { findSlackConnection, type SlackConnection } from './connections';
import { verifySlackSignature } from './signature';

/** 401 `{ok:false}` for both causes, so a caller learns nothing about which ids exist. */
export async function verifiedConnection(ctx: AppContext, connectionId: string, rawBody: Buffer): Promise<SlackConnection> {
  const { database, secretKey, metrics, now } = ctx.state.services;
  const route = ctx.state.routeTemplate ?? 'slack';
  const connection = await findSlackConnection(database.db, secretKey, connectionId);
  if (!connection) {
    metrics.ingress.inc({ route, outcome: 'rejected', reason: 'unknown_installation' });
    throw errors.webhook('unknown_installation', 401);
  }
  const verdict = verifySlackSignature({ rawBody, headers: ctx.headers, secrets: connection.secrets, now });
  if (!verdict.ok) {
    metrics.signatureFailures.inc({ route, reason: verdict.reason });
    metrics.ingress.inc({ route, outcome: 'rejected', reason: 'signature' });
    ctx.state.log.info({ connectionId, reason: verdict.reason }, 'slack signature rejected');
    throw errors.webhook('invalid_signature', 401);
  }
  if (verdict.secret === 'previous') ctx.state.log.info({ connectionId }, 'slack request verified with the previous signing secret');
  return connection;
}

/**
 * Starts `slack-event/{connectionId}/{event_id}`. The workflow id is the dedupe key: a retry
 * (even one racing the first delivery) gets "already started" from Temporal, and
 * REJECT_DUPLICATE keeps a late retry from starting a finished event again. Anything but a
 * definite answer within TEMPORAL_START_TIMEOUT is a 503 (temporalCall), so Slack retries.
 */
export async function enqueueSlackEvent(services: Services, input: SlackEventInput): Promise<'enqueued' | 'duplicate'> {
  const { temporal, config, metrics } = services;
  const typedSearchAttributes = [
    { key: slackSearchAttributes.ConnectionId, value: input.connectionId },
    { key: slackSearchAttributes.SlackEventStatus, value: 'received' },
    ...(input.invocation ? [{ key: slackSearchAttributes.SlackUserId, value: input.invocation.user }] : []),
  ];
  try {
    await temporalCall(
      temporal,
      'slack.start',
      config.temporal.startTimeoutMs,
      () =>
        temporal.client.workflow.start(slackEvent, {
          taskQueue: temporal.taskQueue,
          workflowId: slackEventWorkflowId(input.connectionId, input.eventId),
          workflowIdReusePolicy: 'REJECT_DUPLICATE',
          args: [input],
          typedSearchAttributes,
        }),
      metrics,
    );
    return 'enqueued';
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return 'duplicate';
    throw error;
  }
}
