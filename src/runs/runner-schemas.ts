/** Edge validation and answers of the runner routes (`/v1/automation-runners`). */
import { z } from '../app/http/zod';

export const RUNNER_TAGS = ['Automation Runners'];
export const RUNNER_TOKEN_BODY_LIMIT_BYTES = 4 * 1024;

export const RunnerTokenRequest = z
  .object({
    label: z
      .string()
      .regex(/^[\x20-\x7e]{1,100}$/, 'must be 1 to 100 printable ASCII characters')
      .optional()
      .openapi({ description: 'A name for the runtime in the runners list (a new runner only; a renewal keeps its label).' }),
  })
  .optional()
  .openapi('AutomationRunnerTokenRequest');

export const RunnerTokenBody = z
  .object({
    token: z.string().openapi({ description: 'Send as `Authorization: Bearer <token>` on the automation-run routes. Shown once.' }),
    runnerId: z.string(),
    expiresAt: z.number().int().openapi({ description: 'When the token stops working (ms since the epoch): renew it before.' }),
  })
  .openapi('AutomationRunnerToken');

export const RunnerIdParams = z.object({
  runnerId: z
    .string()
    .min(1)
    .max(200)
    .regex(/^[A-Za-z0-9_.-]+$/, 'must be a runner id')
    .openapi({ description: 'A runner id from the runners list.' }),
});

const RunnerBody = z
  .object({
    runnerId: z.string(),
    memberId: z.string(),
    credential: z.enum(['runner_token', 'api_key']).openapi({ description: 'How the runtime authenticates.' }),
    label: z.string().nullable(),
    version: z.string().nullable().openapi({ description: 'What the runtime sent in `x-den-runtime-version`, if anything.' }),
    online: z.boolean().openapi({ description: 'Seen long-polling a claim or heartbeating a run within `RUNNER_PRESENCE_WINDOW`.' }),
    lastSeenAt: z.number().int().nullable().openapi({ description: 'ms since the epoch; null if never seen.' }),
    runs: z.number().int().openapi({ description: 'Runs it holds now (their claimed attempt is running).' }),
    paused: z.boolean().openapi({ description: "Its member's breaker is open: their requests start no run until `pausedUntil`." }),
    pausedUntil: z.number().int().optional().openapi({ description: 'While paused: when the breaker half-opens (ms since the epoch).' }),
    breaker: z.enum(['closed', 'open', 'half_open']),
  })
  .openapi('AutomationRunner');

export const RunnerListBody = z.object({ runners: z.array(RunnerBody) }).openapi('AutomationRunners');
