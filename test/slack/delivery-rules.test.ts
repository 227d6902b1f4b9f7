/**
 * The pure rules of the thread as Slack behaves: the workspace budget's bucket (no window sees
 * more than the limit; progress leaves a reserve for final answers), a streamed answer's deltas,
 * escapes and tasks, and the last guard on a streamed message's Markdown.
 */
import fc from 'fast-check';
import { bucketLimits, drainToken, takeToken } from '../../src/slack/budget';
import { escapeMarkdown, finalMarkdown, markdownPieces, streamDelta, toolTask, TOOL_NAME_LIMIT } from '../../src/slack/stream';
import { defuseMarkdown } from '../../src/slack/web-api';

describe('the workspace budget', () => {
  const limits = bucketLimits(50, 60_000);

  it('holds a fifth of the limit, refills the rest per window, and keeps half the bucket for finals', () => {
    expect(limits).toEqual({ capacity: 10, refillPerMs: 40 / 60_000, reserve: 5 });
  });

  it('never lets a window see more than the limit, whatever the calls', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 5_000 }), fc.boolean()), { minLength: 1, maxLength: 400 }), (steps) => {
        let state: { tokens: number; at: number } | undefined;
        let now = 0;
        const sent: number[] = [];
        for (const [gap, final] of steps) {
          now += gap;
          const taken = takeToken({ state, now, limits }, final ? 'final' : 'progress');
          state = taken.next;
          if (taken.taken) sent.push(now);
        }
        for (const at of sent) expect(sent.filter((t) => t >= at && t < at + 60_000).length).toBeLessThanOrEqual(50);
      }),
    );
  });

  it('leaves the reserve to final answers: progress waits while a final still gets a token', () => {
    let state = { tokens: 5.5, at: 0 };
    const progress = takeToken({ state, now: 0, limits }, 'progress');
    expect(progress).toMatchObject({ taken: false });
    expect(progress.taken ? 0 : progress.waitMs).toBe(Math.ceil(0.5 / limits.refillPerMs));
    const final = takeToken({ state, now: 0, limits }, 'final');
    expect(final).toMatchObject({ taken: true, next: { tokens: 4.5 } });
    state = drainToken({ state: final.next, now: 0, limits }, 3_000);
    expect(takeToken({ state, now: 2_999, limits }, 'final').taken).toBe(false);
    expect(takeToken({ state, now: 3_000, limits }, 'final').taken).toBe(true);
  });
});

describe('a streamed answer', () => {
  it('escapes what could mention anyone, and keeps block quotes', () => {
    expect(escapeMarkdown('> quoted <!channel>\na & b > c <@U1>')).toBe('> quoted &lt;!channel&gt;\na &amp; b &gt; c &lt;@U1&gt;');
  });

  it('appends what carries on from the streamed text, a new text as a paragraph of its own, nothing for an older one', () => {
    const first = streamDelta({ source: '' }, 'one');
    expect(first).toEqual({ append: 'one', streamed: { source: 'one' } });
    expect(streamDelta(first.streamed, 'one two <x>')).toEqual({ append: ' two &lt;x&gt;', streamed: { source: 'one two <x>' } });
    expect(streamDelta({ source: 'one two' }, 'one')).toEqual({ append: '', streamed: { source: 'one two' } });
    expect(streamDelta({ source: 'one' }, 'other')).toEqual({ append: '\n\nother', streamed: { source: 'other' } });
  });

  it('shows a tool as a task, its name escaped', () => {
    expect(toolTask('tool-3', '<@U1> search', 'in_progress')).toEqual({
      type: 'task_update',
      id: 'tool-3',
      title: 'Using &lt;@U1&gt; search',
      status: 'in_progress',
    });
    // A task's title counts toward what one streamed reply holds: a long name is cut, never inside a character.
    const long = toolTask('tool-4', '🔧'.repeat(TOOL_NAME_LIMIT + 50), 'in_progress');
    expect(long).toMatchObject({ title: `Using ${'🔧'.repeat(TOOL_NAME_LIMIT)}…` });
  });

  it('closes with the rest of the answer, and why for a run that did not succeed', () => {
    expect(finalMarkdown({ source: 'one' }, { status: 'succeeded', error: null, lastAssistantText: 'one two' })).toBe(' two');
    expect(finalMarkdown({ source: '' }, { status: 'succeeded', error: null, lastAssistantText: null })).toBe(
      'The run finished without a reply.',
    );
    expect(finalMarkdown({ source: 'half' }, { status: 'failed', error: 'boom', lastAssistantText: 'half' })).toBe(
      '\n\nThe run failed (boom).',
    );
  });

  it('cuts into calls of at most 12,000 characters, never inside an escape', () => {
    const text = `${'a'.repeat(11_998)}&lt;b ${'c'.repeat(100)}`;
    const pieces = markdownPieces(text);
    expect(pieces.join('')).toBe(text);
    for (const piece of pieces) expect(piece.length).toBeLessThanOrEqual(12_000);
    expect(pieces[1]!.startsWith('&lt;') || pieces[0]!.endsWith('&lt;')).toBe(true);
  });

  it('the last guard defuses a mention and a plain @channel in Markdown', () => {
    expect(defuseMarkdown('<!here> @channel <@U1> [a](https://a.example)')).toBe(
      '&lt;!here> @\u200bchannel &lt;@U1> [a](https://a.example)',
    );
  });
});
