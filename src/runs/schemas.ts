/**
 * Edge validation of the automation-run routes. Every problem is reported with its path;
 * unknown fields are dropped.
 */
import { z } from '../app/http/zod';
import { RUN_EVENT_TYPES, RUN_FAILURE_KINDS, RUN_STATUSES, TERMINAL_EVENT_STATUSES, type RunEventType } from './contract';

/** Body limit of the event route: Temporal warns at 256 KB payloads and fails at 2 MB. */
export const EVENT_BODY_LIMIT_BYTES = 256 * 1024;
export const HEARTBEAT_BODY_LIMIT_BYTES = 4 * 1024;
export const TERMINAL_ERROR_MAX_LENGTH = 4096;
/** A cancel's reason becomes the cancelled run's `error` and the Slack message's text: a short sentence. */
export const CANCEL_REASON_MAX_LENGTH = 500;
const EVENTS_PAGE_MAX = 500;
const RUNS_PAGE_MAX = 500;

/**
 * z.int() is the safe-integer range, so 2^53 and above fail ("numbers above 2^53−1 are invalid").
 * The document states that upper bound too (the generator only writes the lower one).
 */
const safeInt = (min: number) => z.int().min(min).openapi({ maximum: Number.MAX_SAFE_INTEGER });

// The id becomes part of a Temporal workflow id and a Postgres text key: Postgres refuses NUL,
// and lone surrogates do not survive UTF-8, so both would leave a run that cannot be stored.
const wellFormedId = (id: string) =>
  !/[\u0000-\u001f\u007f]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(id);

export const RunIdParams = z.object({
  id: z
    .string()
    .min(1)
    .max(160)
    .refine(wellFormedId, 'must not contain control characters or unpaired surrogates')
    // The refinement, for the document: no C0 control or DEL. A lone surrogate cannot arrive in a
    // path (percent-decoding UTF-8 never yields one), and schemathesis's regex engine drops any
    // pattern that names the surrogate range.
    .openapi({ description: 'The run id, 1 to 160 characters, chosen by the runtime.', pattern: '^[^\\u0000-\\u001f\\u007f]+$' }),
});

const RunEventTypeSchema = z.enum(RUN_EVENT_TYPES).openapi('AutomationRunEventType');

const RunEventFields = z.object({
  attempt: safeInt(1),
  sequence: safeInt(1),
  payload: z.record(z.string(), z.unknown()).openapi({ description: 'Free-form object.' }),
  createdAt: safeInt(0).openapi({ description: "The runtime's timestamp (ms). Kept for the record; ordering uses `sequence`." }),
});

/**
 * The refinement below, for the document (a refinement is invisible to the generator): the kind
 * comes as `type`, as `kind`, or as both when they agree; a terminal event's payload `status` is
 * one of TERMINAL_EVENT_STATUSES and its `error` a string of at most TERMINAL_ERROR_MAX_LENGTH.
 */
const runEventKindDocument = {
  anyOf: [
    { required: ['type'], not: { required: ['kind'] } },
    { required: ['kind'], not: { required: ['type'] } },
    ...RUN_EVENT_TYPES.map((kind) => ({ required: ['type', 'kind'], properties: { type: { const: kind }, kind: { const: kind } } })),
  ],
  if: {
    anyOf: [
      { required: ['type'], properties: { type: { const: 'terminal' } } },
      { required: ['kind'], properties: { kind: { const: 'terminal' } } },
    ],
  },
  then: {
    properties: {
      payload: {
        properties: {
          status: { enum: [...TERMINAL_EVENT_STATUSES] },
          error: { type: 'string', maxLength: TERMINAL_ERROR_MAX_LENGTH },
          failure: { enum: [...RUN_FAILURE_KINDS] },
        },
      },
    },
  },
};

// The kind rules are a separate half of an intersection so that their problems are reported
// together with the other fields' (a refinement on one object is skipped once a field fails).
const RunEventKind = z
  .object({
    type: RunEventTypeSchema.optional().openapi({ description: 'The event kind. `kind` is accepted when `type` is absent.' }),
    kind: RunEventTypeSchema.optional().openapi({ description: 'Alias of `type`.' }),
    payload: z.unknown(),
  })
  .superRefine((body, ctx) => {
    const { type, kind, payload } = body;
    if (type === undefined && kind === undefined) {
      ctx.addIssue({ code: 'custom', path: ['type'], message: 'Required: the event kind, as `type` (or `kind`).' });
    }
    if (type !== undefined && kind !== undefined && type !== kind) {
      ctx.addIssue({ code: 'custom', path: ['kind'], message: '`type` and `kind` disagree; send one of them.' });
    }
    if ((type ?? kind) !== 'terminal' || !payload || typeof payload !== 'object') return;
    const { status, error, failure } = payload as { status?: unknown; error?: unknown; failure?: unknown };
    if (status !== undefined && !(TERMINAL_EVENT_STATUSES as readonly unknown[]).includes(status)) {
      ctx.addIssue({
        code: 'custom',
        path: ['payload', 'status'],
        message: `A terminal event's status is one of ${TERMINAL_EVENT_STATUSES.join(', ')} (default succeeded).`,
      });
    }
    if (error !== undefined && (typeof error !== 'string' || error.length > TERMINAL_ERROR_MAX_LENGTH)) {
      ctx.addIssue({
        code: 'custom',
        path: ['payload', 'error'],
        message: `A terminal event's error is a string of at most ${TERMINAL_ERROR_MAX_LENGTH} characters.`,
      });
    }
    if (failure !== undefined && !(RUN_FAILURE_KINDS as readonly unknown[]).includes(failure)) {
      ctx.addIssue({
        code: 'custom',
        path: ['payload', 'failure'],
        message: `A terminal event's failure is one of ${RUN_FAILURE_KINDS.join(', ')}.`,
      });
    }
  })
  .openapi(runEventKindDocument);

export const RunEventBody = z
  .intersection(RunEventFields, RunEventKind)
  .transform((body) => ({
    attempt: body.attempt,
    sequence: body.sequence,
    type: (body.type ?? body.kind) as RunEventType,
    payload: body.payload,
    createdAt: body.createdAt,
  }))
  .openapi('AutomationRunEventInput');

export const RunHeartbeatBody = z.object({ attempt: safeInt(1) }).openapi('AutomationRunHeartbeatInput');

const failureDescription =
  'For `failed`: `runtime` when the runtime broke (the command crashed or exited without an answer, the runner failed on ' +
  "its own), `task` when the work failed and the runtime answered. Runtime failures count toward the member's breaker; " +
  'without it, a failed run counts unless it answered (an `assistant` text or a `result`).';

export const RunCompleteBody = z
  .object({
    attempt: safeInt(1),
    status: z.enum(TERMINAL_EVENT_STATUSES),
    error: z.string().max(TERMINAL_ERROR_MAX_LENGTH).optional(),
    failure: z.enum(RUN_FAILURE_KINDS).optional().openapi({ description: failureDescription }),
    result: z.unknown().optional().openapi({ description: "Any JSON value: kept in the terminal event's payload." }),
  })
  .openapi('AutomationRunCompletion');

export const RunCancelBody = z
  .object({
    reason: z
      .string()
      .min(1)
      .max(CANCEL_REASON_MAX_LENGTH)
      .optional()
      .openapi({ description: "Why; it becomes the cancelled run's `error` (default `cancel_requested`)." }),
  })
  .optional()
  .openapi('AutomationRunCancelRequest');

/** A query-string integer: digits only (no signs, exponents or blanks), then bounds. */
const queryInt = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,16}$/, 'must be a non-negative integer')
    .transform(Number)
    .pipe(z.int().min(min).max(max))
    // The document shows the integer the string must hold, with its bounds, not the string.
    .openapi({ type: 'integer', minimum: min, maximum: max });

export const RunEventsQuery = z.object({
  after: queryInt(0, Number.MAX_SAFE_INTEGER)
    .optional()
    .openapi({ description: 'Only events with a greater sequence (exclusive). Use with `attempt` to page.', type: 'integer' }),
  attempt: queryInt(1, Number.MAX_SAFE_INTEGER).optional().openapi({ description: 'Only this attempt.', type: 'integer' }),
  limit: queryInt(1, EVENTS_PAGE_MAX)
    .default(100)
    .openapi({ description: `1 to ${EVENTS_PAGE_MAX}, default 100.`, type: 'integer' }),
});

export const RunListQuery = z.object({
  status: z.enum(RUN_STATUSES).optional(),
  limit: queryInt(1, RUNS_PAGE_MAX)
    .default(50)
    .openapi({ description: `1 to ${RUNS_PAGE_MAX}, default 50.`, type: 'integer' }),
});

// ---- responses

const ms = () => z.number().int().nullable();

export const RunSummaryBody = z
  .object({
    id: z.string(),
    status: z.enum(RUN_STATUSES),
    attempt: z.number().int(),
    createdAt: z.number().int(),
    startedAt: ms(),
    endedAt: ms(),
    lastHeartbeatAt: ms(),
    leaseExpiresAt: ms(),
    eventCount: z.number().int(),
    countsByType: z.record(z.string(), z.number().int()),
    usage: z.record(z.string(), z.number()),
    error: z.string().nullable(),
    memberId: z.string().nullable(),
    cancelRequested: z
      .object({ at: z.number().int(), reason: z.string().nullable(), memberId: z.string() })
      .nullable()
      .openapi({ description: 'A request to stop the run: when (ms), why, and by whom. Null when none was made.' }),
    ignoredEvents: z.record(z.string(), z.number().int()),
    input: z
      .object({
        text: z.string(),
        context: z
          .array(
            z.object({
              userId: z.string().nullable(),
              bot: z.boolean().openapi({ description: "Written by a bot: den's own answers, and other apps'." }),
              text: z.string(),
              ts: z.string().openapi({ description: "Slack's id of the message, which orders the thread." }),
            }),
          )
          .optional()
          .openapi({
            description:
              'Slack-routed runs asked in a thread: its earlier messages, oldest first (the asks, den’s answers, what others wrote), ' +
              'newest kept within SLACK_CONTEXT_MAX_MESSAGES and SLACK_CONTEXT_MAX_CHARS.',
          }),
      })
      .nullable()
      .openapi({ description: "What was asked. Slack-routed runs: the member's message, bot mention removed." }),
    origin: z
      .object({
        kind: z.literal('slack'),
        connectionId: z.string(),
        teamId: z.string(),
        channelId: z.string(),
        threadTs: z.string().openapi({ description: "The thread the answer goes to: the message's thread_ts, else its ts." }),
        userId: z.string(),
      })
      .nullable()
      .openapi({ description: 'Where the run came from, when something other than its runtime created it.' }),
  })
  .openapi('AutomationRun', { description: 'Timestamps are milliseconds since the epoch.' });

export const RunClaimBody = z
  .object({
    run: RunSummaryBody,
    attempt: z.number().int().openapi({ description: 'The attempt this claim started: report with it.' }),
    leaseExpiresAt: z.number().int(),
  })
  .openapi('AutomationRunClaim');

export const RunClaimRequestBody = z.object({}).strict().optional().openapi('AutomationRunClaimRequest');

export const RunClaimNextBody = z
  .object({
    waitSeconds: z
      .number()
      .int()
      .min(0)
      .max(30)
      .default(0)
      .openapi({ description: 'Long-poll: answer as soon as a run is claimable, or 204 when the wait ends with nothing.' }),
  })
  .strict()
  .optional()
  .openapi('AutomationRunClaimNextRequest');

/** A number a refusal carries for the runtime (which one depends on `error`). */
const detail = (description: string) => z.number().int().optional().openapi({ description });

export const RunConflictBody = z
  .object({
    error: z.enum([
      'run_closed',
      'already_claimed',
      'not_claimed',
      'stale_attempt',
      'attempt_out_of_range',
      'sequence_out_of_window',
      'buffer_full',
      'after_terminal',
      'terminal_not_last',
    ]),
    status: z.string().optional().openapi({ description: "The run's status (run_closed, already_claimed, not_claimed, stale_attempt)." }),
    maxAttempts: detail('attempt_out_of_range: the highest attempt the run takes.'),
    expected: detail('sequence_out_of_window, buffer_full: the sequence the run applies next; send it first.'),
    max: detail('sequence_out_of_window: the highest sequence the run takes now.'),
    maxBufferedBytes: detail('buffer_full: the payload bytes the run keeps for out-of-order events.'),
    terminalSequence: detail("after_terminal: the sequence of the run's terminal event."),
    lastSequence: detail('terminal_not_last: the highest sequence the run already holds.'),
  })
  .openapi('AutomationRunConflict');

export const RunHeartbeatReply = z
  .object({
    ok: z.literal(true),
    leaseExpiresAt: z
      .number()
      .int()
      .openapi({ description: "When the attempt's lease ends unless another heartbeat or event moves it (ms since the epoch)." }),
    cancelRequested: z.boolean().openapi({
      description:
        'Someone asked the run to stop (POST /v1/automation-runs/{id}/cancel, or Slack): stop the work and report a `terminal` event with `status: cancelled`.',
    }),
    attempt: z
      .number()
      .int()
      .openapi({ description: "The run's current attempt, as the run's row showed it when the heartbeat was forwarded." }),
    leaseValid: z.boolean().openapi({
      description:
        "Whether the heartbeat's attempt holds the run's lease: false for an older attempt, or one whose lease was lost (the run waits for a new claim). Stop the work when false.",
    }),
  })
  .openapi('AutomationRunHeartbeatReply', {
    description:
      'Added to `{ok:true}`: clients that read only `ok` keep working. Coalesced heartbeats answer from what this process last learnt.',
  });

export const RunCompleteReply = z
  .object({
    ok: z.literal(true),
    status: z.enum(RUN_STATUSES).openapi({
      description: "The run's status: its final one once the completion closed it; `running` while it waits for earlier events.",
    }),
  })
  .openapi('AutomationRunCompleteReply');

export const RunCancelAckBody = z
  .object({
    status: z.enum(RUN_STATUSES).openapi({ description: '`cancelled` for a run no runtime held (it closed at once); else its status.' }),
    cancelRequested: z.literal(true),
  })
  .openapi('AutomationRunCancelAck');

const RunEventRecord = z
  .object({
    attempt: z.number().int(),
    sequence: z.number().int(),
    type: RunEventTypeSchema,
    payload: z.record(z.string(), z.unknown()),
    createdAt: z.number().int(),
    receivedAt: z.number().int(),
  })
  .openapi('AutomationRunEvent');

export const RunEventsBody = z.object({ events: z.array(RunEventRecord) }).openapi('AutomationRunEvents');
export const RunListBody = z.object({ runs: z.array(RunSummaryBody) }).openapi('AutomationRuns');
