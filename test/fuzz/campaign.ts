/**
 * The bad-input campaign: property-based requests against every mounted route of a real API
 * process. Shared by the `npm test` version (a few hundred cases per route) and `npm run fuzz`.
 *
 * Properties: no 5xx except a 503 that names an unavailable dependency; the process never
 * crashes (an unhandled rejection would kill it under Node's default mode); memory returns to
 * its baseline afterwards.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { signGithubPayload } from '../../src/github/signature';
import { signSlackRequest } from '../../src/slack/signature';
import { rawRequest, type RawResponse } from './raw-http';

export interface Credentials {
  owner: string;
  member: string;
  session: string;
}

/** Real secrets, so a share of the inputs pass the signature checks and reach the parsers. */
export interface Signers {
  slack: { connectionId: string; secret: string; teamId: string; apiAppId: string };
  github: { secret: string };
}

export interface CampaignOptions {
  port: number;
  credentials: Credentials;
  signers?: Signers;
  runsPerRoute: number;
  /** Instead of runsPerRoute: at least this many inputs in all, spread evenly over the routes. */
  totalInputs?: number;
  seed?: number;
  /** Adds one 10 MB body per route. */
  hugeBodies: boolean;
}

export interface RouteTally {
  route: string;
  inputs: number;
  statuses: Record<string, number>;
}

export interface Violation {
  route: string;
  status: number;
  request: string;
  body: string;
}

type Auth = 'none' | 'owner' | 'member' | 'session' | 'garbage';

/**
 * Routes whose valid input causes outbound work (MCP probes of arbitrary hosts) are fuzzed
 * only with credentials that can't reach the handler: the campaign must never make this
 * process talk to the network.
 */
const NO_VALID_CREDENTIALS = new Set(['/v1/mcp-connections/resolve']);
/** The provider paths and the spec's neutral aliases (chatplatform, codehost) of the same routes. */
const SLACK_PATH = /^\/v1\/integrations\/(slack|chatplatform)\//;
const GITHUB_PATH = /^\/v1\/webhooks\/connectors\/(github|codehost)$/;

const INJECTIONS = [
  'x\r\nx-api-key: den_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
  'a\r\n\r\nGET /health HTTP/1.1',
  '\u0000',
  '\u00ff\u00fe',
  'Bearer ',
  'Bearer den_x',
  'v0=' + 'f'.repeat(64),
  'sha256=' + '0'.repeat(64),
  'sha256=' + 'G'.repeat(64),
  '9'.repeat(400),
  '-1',
  '1e400',
];

const HEADER_NAMES = [
  'content-type',
  'x-api-key',
  'authorization',
  'x-slack-signature',
  'x-slack-request-timestamp',
  'x-slack-retry-num',
  'x-slack-retry-reason',
  'x-hub-signature-256',
  'x-github-event',
  'x-github-delivery',
  'x-request-id',
  'content-encoding',
  'accept',
];

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=utf-16',
  'application/x-www-form-urlencoded',
  'text/plain',
  'multipart/form-data; boundary=x',
  'application/octet-stream',
  '',
  ';;;',
];

const DEEP_ARRAY = Buffer.from('['.repeat(10_000) + ']'.repeat(10_000));
const DEEP_OBJECT = Buffer.from('{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000));
const HUGE = Buffer.alloc(10 * 1024 * 1024, 'a');

const hugeNumbers = fc
  .record({
    attempt: fc.constantFrom('9007199254740992', '9007199254740993', '1e400', '-0', '1.5', '0', '"1"', 'null'),
    sequence: fc.constantFrom('9007199254740991', '18446744073709551616', '1e308', '-1', 'NaN'),
    createdAt: fc.constantFrom('-1', '9007199254740992', '0.1', '1e21'),
  })
  .map((n) => `{"attempt":${n.attempt},"sequence":${n.sequence},"type":"user","payload":{},"createdAt":${n.createdAt}}`);

const slackEvent = fc.oneof(
  fc.anything(),
  fc.record({
    type: fc.constantFrom('app_mention', 'message', 'app_uninstalled', 'tokens_revoked', 'app_home_opened', 'reaction_added'),
    user: fc.oneof(fc.constantFrom('U0FUZZ01', 'UBOT'), fc.string()),
    channel: fc.oneof(fc.constantFrom('C0FUZZ01', 'D0FUZZ01'), fc.string()),
    channel_type: fc.constantFrom('im', 'channel', 'mpim', undefined),
    ts: fc.oneof(fc.constant('1700000000.000100'), fc.string()),
    text: fc.oneof(fc.string(), fc.constant('   '), fc.integer()),
    subtype: fc.constantFrom(undefined, 'bot_message', 'message_changed'),
    bot_id: fc.constantFrom(undefined, 'B1'),
  }),
);

const slackish = (team: string, app: string) =>
  fc
    .record({
      type: fc.constantFrom('url_verification', 'event_callback', 'app_rate_limited', 'x'),
      challenge: fc.oneof(fc.string(), fc.integer(), fc.constant(null)),
      team_id: fc.oneof(fc.string(), fc.constant(team)),
      api_app_id: fc.oneof(fc.string(), fc.constant(app)),
      event_id: fc.oneof(fc.string(), fc.integer(), fc.uuid()),
      event: slackEvent,
    })
    .map((v) => JSON.stringify(v));

/**
 * Slash-command forms, signed for the real installation half the time (like the events route),
 * so mutated fields reach the form parser, the ssl_check and the team/app checks.
 */
const slashCommandish = (team: string, app: string) => {
  const fields = {
    token: fc.string(),
    team_id: fc.oneof({ weight: 3, arbitrary: fc.constant(team) }, fc.string(), fc.constant('')),
    api_app_id: fc.oneof({ weight: 3, arbitrary: fc.constant(app) }, fc.string(), fc.constant('')),
    user_id: fc.oneof({ weight: 3, arbitrary: fc.constant('U0FUZZ01') }, fc.string(), fc.constant('')),
    command: fc.oneof(fc.constant('/den'), fc.string()),
    text: fc.string(),
    channel_id: fc.string(),
    response_url: fc.string(),
    trigger_id: fc.string(),
    ssl_check: fc.constantFrom('1', '0', 'x', ''),
  };
  const encode = (record: Record<string, string>) => new URLSearchParams(Object.entries(record)).toString();
  // Mostly well-formed commands of the real installation (mutated field by field), some sparse.
  const form = fc.oneof(
    { weight: 3, arbitrary: fc.record(fields, { requiredKeys: ['team_id', 'api_app_id', 'user_id', 'command'] }).map(encode) },
    { weight: 1, arbitrary: fc.record(fields, { requiredKeys: [] }).map(encode) },
  );
  return fc.oneof(
    { weight: 4, arbitrary: form },
    // Repeated fields, broken percent-encoding, stray separators.
    { weight: 1, arbitrary: fc.tuple(form, form).map(([a, b]) => `${a}&${b}`) },
    { weight: 1, arbitrary: fc.tuple(form, fc.constantFrom('%', '%E0%A4%A', '&&&', '=', '%00', '+%2B')).map(([a, junk]) => `${a}${junk}`) },
  );
};

const githubish = fc
  .record({
    action: fc.constantFrom('deleted', 'removed', 'renamed', 'opened', 'x'),
    installation: fc.oneof(fc.record({ id: fc.anything() }), fc.anything()),
    repository: fc.oneof(fc.record({ id: fc.anything(), full_name: fc.anything() }), fc.anything()),
    ref: fc.anything(),
    after: fc.oneof(fc.constant('0'.repeat(40)), fc.string()),
  })
  .map((v) => JSON.stringify(v));

/** Bodies for a route: provider-shaped ones weigh more on that provider's route. */
const bodiesFor = (template: string, team = 'T1', app = 'A1'): fc.Arbitrary<Buffer> => {
  const provider = SLACK_PATH.test(template)
    ? template.endsWith('/commands')
      ? slashCommandish(team, app)
      : slackish(team, app)
    : GITHUB_PATH.test(template)
      ? githubish
      : undefined;
  const anyBody = genericBodies(team, app);
  return provider ? fc.oneof({ weight: 1, arbitrary: anyBody }, { weight: 2, arbitrary: provider.map((b) => Buffer.from(b)) }) : anyBody;
};

const genericBodies = (team: string, app: string): fc.Arbitrary<Buffer> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.json().map((s) => Buffer.from(s)) },
    { weight: 2, arbitrary: fc.uint8Array({ maxLength: 2048 }).map((a) => Buffer.from(a)) },
    { weight: 2, arbitrary: fc.string({ maxLength: 512 }).map((s) => Buffer.from(s)) },
    { weight: 2, arbitrary: hugeNumbers.map((s) => Buffer.from(s)) },
    { weight: 2, arbitrary: slackish(team, app).map((s) => Buffer.from(s)) },
    { weight: 2, arbitrary: githubish.map((s) => Buffer.from(s)) },
    { weight: 1, arbitrary: fc.dictionary(fc.string(), fc.string()).map((d) => Buffer.from(new URLSearchParams(d).toString())) },
    { weight: 1, arbitrary: fc.constantFrom(DEEP_ARRAY, DEEP_OBJECT, Buffer.alloc(0), Buffer.from([0xc3, 0x28, 0xa0, 0xa1])) },
  );

const headerValue = fc.oneof(fc.string({ maxLength: 120 }), fc.constantFrom(...INJECTIONS));
const headers = fc.array(fc.tuple(fc.constantFrom(...HEADER_NAMES), headerValue), { maxLength: 6 });

const segment = fc.oneof(
  fc.constantFrom(
    'emc_01h2xcejqtf2nbrexx3vqjhp41',
    'emc_',
    'EMC_01H2XCEJQTF2NBREXX3VQJHP41',
    '..',
    '%00',
    '%2e%2e%2f',
    'run-1',
    'a'.repeat(161),
  ),
  fc.string({ minLength: 1, maxLength: 200 }).map((s) => encodeURIComponent(s)),
);

function concretePath(template: string, values: string[]): string {
  let i = 0;
  return template.replace(/\{\w+\}/g, () => values[i++ % values.length] ?? 'x');
}

function credentialHeaders(auth: Auth, credentials: Credentials): [string, string][] {
  switch (auth) {
    case 'owner':
      return [['x-api-key', credentials.owner]];
    case 'member':
      return [['x-api-key', credentials.member]];
    case 'session':
      return [['authorization', `Bearer ${credentials.session}`]];
    case 'garbage':
      return [['x-api-key', 'den_garbage']];
    default:
      return [];
  }
}

/** Valid provider signature headers for `body` on a Slack or GitHub route; none elsewhere. */
function signatureHeaders(template: string, body: Buffer, signers: Signers | undefined): [string, string][] {
  if (!signers) return [];
  if (SLACK_PATH.test(template) && !template.endsWith('/account-links')) {
    const timestamp = Math.floor(Date.now() / 1000);
    return [
      ['x-slack-request-timestamp', String(timestamp)],
      ['x-slack-signature', signSlackRequest(signers.slack.secret, timestamp, body)],
    ];
  }
  if (GITHUB_PATH.test(template)) {
    return [
      ['x-hub-signature-256', signGithubPayload(signers.github.secret, body)],
      ['x-github-event', 'push'],
      ['x-github-delivery', randomUUID()],
    ];
  }
  return [];
}

function isAcceptable(response: RawResponse): boolean {
  if (response.status < 500) return true;
  // A dependency outage is the one 5xx we allow: the sender retries.
  return response.status === 503 && response.body.toString('utf8').includes('unavailable');
}

interface FuzzRoute {
  method: string;
  /** The OpenAPI path template. */
  path: string;
}

/**
 * Every operation the server's own /openapi.json declares (each alias is a path of its own
 * there), so the campaign covers what the server says it serves, not a list kept beside it.
 */
async function fuzzableRoutes(port: number): Promise<FuzzRoute[]> {
  const response = await rawRequest({ port, method: 'GET', path: '/openapi.json', headers: [], body: Buffer.alloc(0) });
  const document = JSON.parse(response.body.toString('utf8')) as { paths: Record<string, Record<string, unknown>> };
  return Object.entries(document.paths).flatMap(([path, operations]) => Object.keys(operations).map((method) => ({ method, path })));
}

export async function runCampaign(options: CampaignOptions): Promise<{ tallies: RouteTally[]; violations: Violation[] }> {
  const tallies: RouteTally[] = [];
  const violations: Violation[] = [];
  const routes = await fuzzableRoutes(options.port);
  const runsPerRoute = options.totalInputs ? Math.ceil(options.totalInputs / routes.length) : options.runsPerRoute;
  for (const route of routes) {
    const tally: RouteTally = { route: `${route.method.toUpperCase()} ${route.path}`, inputs: 0, statuses: {} };
    tallies.push(tally);
    const auths: Auth[] = NO_VALID_CREDENTIALS.has(route.path)
      ? ['none', 'member', 'garbage']
      : ['none', 'owner', 'member', 'session', 'garbage'];
    const paths = [route.path];

    const send = async (path: string, auth: Auth, extra: [string, string][], contentType: string, body: Buffer, sign = false) => {
      if (sign) extra = [...extra, ...signatureHeaders(route.path, body, options.signers)];
      const requestHeaders: [string, string][] = [
        ...(contentType ? ([['content-type', contentType]] as [string, string][]) : []),
        ...credentialHeaders(auth, options.credentials),
        ...extra,
      ];
      let response: RawResponse;
      try {
        response = await rawRequest({ port: options.port, method: route.method.toUpperCase(), path, headers: requestHeaders, body });
      } catch (error) {
        const reset = /EPIPE|ECONNRESET/.test(String(error));
        if (reset && body.length > 1024 * 1024) {
          // The server answered without reading a multi-megabyte upload and closed, as the
          // client's `Connection: close` asked; TCP then resets and the answer can be lost.
          // That is a transport outcome, not a 5xx: tallied, not a violation.
          tally.inputs += 1;
          tally.statuses.reset = (tally.statuses.reset ?? 0) + 1;
          return true;
        }
        // No answer at all is a violation (the server hung up on a request).
        response = { status: 599, headers: '', body: Buffer.from(String(error)) };
      }
      tally.inputs += 1;
      tally.statuses[response.status] = (tally.statuses[response.status] ?? 0) + 1;
      if (!isAcceptable(response)) {
        violations.push({
          route: tally.route,
          status: response.status,
          request: `${route.method.toUpperCase()} ${path} ${JSON.stringify(requestHeaders)} ${body.subarray(0, 200).toString('utf8')}`,
          body: response.body.subarray(0, 300).toString('utf8'),
        });
      }
      return isAcceptable(response);
    };

    const signable = options.signers !== undefined && signatureHeaders(route.path, Buffer.alloc(0), options.signers).length > 0;
    const realConnection = options.signers?.slack.connectionId ?? 'emc_01h2xcejqtf2nbrexx3vqjhp41';
    await fc
      .assert(
        fc.asyncProperty(
          fc.constantFrom(...paths),
          fc.array(segment, { minLength: 1, maxLength: 3 }),
          fc.constantFrom(...auths),
          fc.constantFrom(...CONTENT_TYPES),
          headers,
          bodiesFor(route.path, options.signers?.slack.teamId, options.signers?.slack.apiAppId),
          // Half of a signable route's inputs carry a valid signature for a real installation.
          signable ? fc.boolean() : fc.constant(false),
          async (template, values, auth, contentType, extra, body, sign) =>
            send(concretePath(template, sign ? [realConnection] : values), auth, extra, contentType, body, sign),
        ),
        { numRuns: runsPerRoute, seed: options.seed, endOnFailure: true },
      )
      .catch(() => undefined); // violations are collected above, with the request that caused them

    if (options.hugeBodies) {
      for (const auth of auths)
        await send(concretePath(route.path, ['emc_01h2xcejqtf2nbrexx3vqjhp41']), auth, [], 'application/json', HUGE);
    }
  }
  return { tallies, violations };
}

/** Reads a gauge from the process's own /metrics. */
export async function readMetric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  if (!line) throw new Error(`metric ${name} not found`);
  return Number(line.split(' ').pop());
}
