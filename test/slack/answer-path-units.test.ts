/**
 * The pure rules of the answer path: how a streamed answer is cut into segments Slack lets finish
 * (src/slack/stream-segments.ts), when a rotating token is refreshed (src/slack/tokens.ts), and
 * how a channel's posts are scheduled (src/slack/pacing.ts).
 */
import {
  cutToFit,
  DEFAULT_STREAM_LIMITS,
  fitsOneCall,
  freshSegment,
  pieceForSegment,
  segmentDone,
  chunkBytes,
} from '../../src/slack/stream-segments';
import { refreshDue } from '../../src/slack/tokens';
import { utf8Bytes } from '../../src/app/utf8';
import { holdSchedule, MAX_INLINE_WAIT_MS, reserveSlot } from '../../src/slack/pacing';
import { slackSettings } from '../../src/slack/settings';

const limits = { maxAgeMs: 16_000, maxBytes: 1_000 };

describe('stream segments', () => {
  it('counts UTF-8 bytes as Slack does, without Buffer (multi-byte characters and surrogate pairs)', () => {
    for (const text of ['', 'plain', 'é', '日本語', '👍🏽 ok', 'a\u0000b']) expect(utf8Bytes(text)).toBe(Buffer.byteLength(text, 'utf8'));
    expect(chunkBytes([{ type: 'task_update', id: 't', title: 'Using é', status: 'in_progress' }])).toBe(Buffer.byteLength('Using é'));
  });

  it('cuts within the bytes left, at a line break or space in the second half, never inside an entity or a surrogate pair', () => {
    const lines = Array.from({ length: 40 }, (_, i) => `line ${String(i).padStart(3, '0')} ${'x'.repeat(40)}`).join('\n');
    const cut = cutToFit(lines, 500);
    expect(utf8Bytes(lines.slice(0, cut))).toBeLessThanOrEqual(500);
    expect(lines[cut - 1]).toBe('\n');
    expect(cutToFit('short', 500)).toBe(5);
    // An entity that would straddle the cut moves the cut before it.
    const entity = `${'a'.repeat(498)}&amp;bb`;
    expect(cutToFit(entity, 500)).toBe(498);
    // Emoji are 4 bytes: a cut never splits one.
    const emoji = '👍'.repeat(200);
    const at = cutToFit(emoji, 401);
    expect(at % 2).toBe(0);
    expect(utf8Bytes(emoji.slice(0, at))).toBeLessThanOrEqual(401);
  });

  it('a segment takes what fits, a part filling a room worth it, or nothing when the room is small', () => {
    const segment = { ...freshSegment(0, 1), bytes: 900 };
    expect(pieceForSegment('x'.repeat(100), segment, limits)).toBe('x'.repeat(100));
    expect(pieceForSegment('x'.repeat(150), segment, limits)).toBe('');
    const roomy = { ...freshSegment(0, 1), bytes: 500 };
    expect(pieceForSegment('x'.repeat(700), roomy, limits)).toBe('x'.repeat(500));
  });

  it('one call is what it was before segments: the segment open, young and with room', () => {
    const segment = freshSegment(1_000, 1);
    const add = { markdown: 'x'.repeat(900), chunks: [] };
    expect(fitsOneCall({ segment, add, now: 1_000 + limits.maxAgeMs - 1, limits })).toBe(true);
    expect(fitsOneCall({ segment, add, now: 1_000 + limits.maxAgeMs, limits })).toBe(false);
    expect(fitsOneCall({ segment: { ...segment, bytes: 200 }, add, now: 1_000, limits })).toBe(false);
    expect(fitsOneCall({ segment: { ...segment, state: 'stuck' }, add: { markdown: '', chunks: [] }, now: 1_000, limits })).toBe(false);
    expect(segmentDone({ ...segment, state: 'full' }, 1_000, limits)).toBe(true);
  });

  it('defaults inside what Slack allows: 4 minutes of about 5, 9,000 bytes of about 10,600', () => {
    expect(DEFAULT_STREAM_LIMITS).toEqual({ maxAgeMs: 240_000, maxBytes: 9_000 });
    const parsed = slackSettings.parse({});
    expect(parsed.ok && { stream: parsed.settings.stream, pace: parsed.settings.channelPostIntervalMs }).toEqual({
      stream: DEFAULT_STREAM_LIMITS,
      pace: 1_000,
    });
  });

  it('refuses settings that would make a segment too short or too large to be worth one', () => {
    expect(slackSettings.parse({ SLACK_STREAM_MAX_AGE: '9s' })).toEqual({ ok: false, problems: ['SLACK_STREAM_MAX_AGE: at least 10s'] });
    expect(slackSettings.parse({ SLACK_STREAM_MAX_AGE: '10s' }).ok).toBe(true);
    for (const bytes of ['999', '12001']) expect(slackSettings.parse({ SLACK_STREAM_MAX_BYTES: bytes }).ok).toBe(false);
  });
});

describe('the ack of an event', () => {
  it('waits for Temporal 2 s by default, never past what Slack allows the answer', () => {
    const parsed = slackSettings.parse({});
    expect(parsed.ok && parsed.settings.eventAckWaitMs).toBe(2_000);
    expect(slackSettings.parse({ SLACK_EVENT_ACK_WAIT: '3s' })).toEqual({
      ok: false,
      problems: ['SLACK_EVENT_ACK_WAIT: more than 0 and at most 2.5s'],
    });
    expect(slackSettings.parse({ SLACK_EVENT_ACK_WAIT: '0' }).ok).toBe(false);
    expect(slackSettings.parse({ SLACK_EVENT_ACK_WAIT: '2500' }).ok).toBe(true);
  });
});

describe('token rotation', () => {
  it('refreshes once less than a tenth of the lifetime, at most ten minutes, is left', () => {
    const minute = { issuedAt: 0, expiresAt: 60_000 };
    expect(refreshDue(minute, 53_999)).toBe(false);
    expect(refreshDue(minute, 54_000)).toBe(true);
    const twelveHours = { issuedAt: 0, expiresAt: 12 * 3_600_000 };
    expect(refreshDue(twelveHours, twelveHours.expiresAt - 10 * 60_000 - 1)).toBe(false);
    expect(refreshDue(twelveHours, twelveHours.expiresAt - 10 * 60_000)).toBe(true);
  });
});

describe('channel pacing', () => {
  it('gives each post the next slot one interval after the last, and leaves a far one unreserved', () => {
    let schedule: { at: number } | undefined;
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      const { slot, next } = reserveSlot(schedule, 10_000, { intervalMs: 1_000, maxWaitMs: MAX_INLINE_WAIT_MS });
      expect(slot.reserved).toBe(true);
      waits.push(slot.waitMs);
      schedule = next;
    }
    expect(waits).toEqual([0, 1_000, 2_000, 3_000]);
    const far = reserveSlot(schedule, 10_000, { intervalMs: 1_000, maxWaitMs: MAX_INLINE_WAIT_MS });
    expect(far.slot).toEqual({ reserved: false, waitMs: 1_000 });
    expect(far.next).toEqual(schedule);
  });

  it("moves the schedule past a 429's Retry-After, never earlier", () => {
    expect(holdSchedule({ at: 5_000 }, 1_000, 3_000)).toEqual({ at: 5_000 });
    expect(holdSchedule({ at: 2_000 }, 1_000, 3_000)).toEqual({ at: 4_000 });
    expect(holdSchedule(undefined, 1_000, 3_000)).toEqual({ at: 4_000 });
  });
});
