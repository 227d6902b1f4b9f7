/** The pure rules of an invocation's message: the throttle, what progress shows, and the split. */
import fc from 'fast-check';
import { markdownToMrkdwn } from '../../src/slack/mrkdwn';
import {
  CANCEL_ACTION_ID,
  editDelay,
  finalBlocks,
  MESSAGE_TEXT_LIMIT,
  newerProgress,
  nextEditAt,
  progressBlocks,
  progressText,
  splitMessage,
  WORKING_TEXT,
} from '../../src/slack/progress';
import { escapeMrkdwn } from '../../src/slack/texts';
import { MENTION_FORMS, unsafeMrkdwn } from '../harness/slack';

/** Text with every mention form, escapes and links in it, and plain text between. */
const risky = fc
  .array(
    fc.oneof(fc.constantFrom(...MENTION_FORMS, '[docs](https://docs.example/a b)', '&', '<', '>', ' ', '\n'), fc.string({ maxLength: 12 })),
    {
      maxLength: 60,
    },
  )
  .map((pieces) => pieces.join(''));

describe('the throttle', () => {
  it('allows the next edit one interval later, or after Retry-After when that is longer', () => {
    expect(nextEditAt(10_000, 3000)).toBe(13_000);
    expect(nextEditAt(10_000, 3000, 2000)).toBe(13_000);
    expect(nextEditAt(10_000, 3000, 5000)).toBe(15_000);
  });
  it('waits what is left of it, and nothing once it has passed', () => {
    expect(editDelay(11_000, 13_000)).toBe(2000);
    expect(editDelay(13_000, 13_000)).toBe(0);
    expect(editDelay(20_000, 13_000)).toBe(0);
  });
  it('keeps the newest report whatever order they come in', () => {
    const a = { runId: 'r', sequence: 2, text: 'a' };
    const b = { runId: 'r', sequence: 5, text: 'b' };
    expect(newerProgress(null, a)).toBe(a);
    expect(newerProgress(a, b)).toBe(b);
    expect(newerProgress(b, a)).toBe(b);
  });
});

describe('what the message shows', () => {
  it('the newest text, a tool line, or the working text', () => {
    expect(progressText({ text: 'half way' })).toBe('half way');
    expect(progressText({ text: '<!channel> <@U1> <https://evil.example|click> a & b' })).toBe(
      '&lt;!channel&gt; &lt;@U1&gt; &lt;https://evil.example|click&gt; a &amp; b',
    );
    expect(progressText({ tool: 'web<search>' })).toBe('_using web&lt;search&gt;…_');
    expect(progressText({ text: '  ' })).toBe(WORKING_TEXT);
    expect(progressText({ text: 'x'.repeat(5000) })).toHaveLength(MESSAGE_TEXT_LIMIT);
  });
  it('a long text cut short without cutting an escape in two', () => {
    const text = progressText({ text: `${'x'.repeat(MESSAGE_TEXT_LIMIT - 8)}<<<<` });
    expect(text).toBe(`${'x'.repeat(MESSAGE_TEXT_LIMIT - 8)}&lt;…`);
  });
  it('for any text or tool: nothing in it that Slack acts on', () => {
    fc.assert(
      fc.property(risky, fc.option(risky), (text, tool) => {
        for (const progress of [{ text }, { tool: tool ?? undefined }, { text: `${'y'.repeat(2990)}${text}` }]) {
          const shown = progressText(progress);
          expect(unsafeMrkdwn(shown)).toEqual([]);
          expect(shown.length).toBeLessThanOrEqual(MESSAGE_TEXT_LIMIT);
        }
      }),
      { numRuns: 500 },
    );
  });
  it('a Cancel button carrying the run id while it works, none at the end', () => {
    expect(progressBlocks('t', 'run-1')[1]).toMatchObject({ elements: [{ action_id: CANCEL_ACTION_ID, value: 'run-1' }] });
    expect(finalBlocks('t')).toEqual([{ type: 'section', text: { type: 'mrkdwn', text: 't', verbatim: true } }]);
  });
});

describe('splitMessage', () => {
  it('leaves a short text whole', () => {
    expect(splitMessage('short', 10)).toEqual(['short']);
    expect(splitMessage('', 10)).toEqual(['']);
  });
  it('cuts at line breaks, then spaces, then anywhere', () => {
    expect(splitMessage('aaaa bbbb\ncccc dddd', 12)).toEqual(['aaaa bbbb', 'cccc dddd']);
    expect(splitMessage('aaaa bbbb cccc', 10)).toEqual(['aaaa bbbb', 'cccc']);
    expect(splitMessage('abcdefghij', 4)).toEqual(['abcd', 'efgh', 'ij']);
  });
  it('never cuts inside an escape entity', () => {
    expect(splitMessage('aaaaaaa &lt;bb', 10)).toEqual(['aaaaaaa', '&lt;bb']);
    expect(splitMessage('aaaaaaa&lt;bb', 10)).toEqual(['aaaaaaa', '&lt;bb']);
    expect(splitMessage('aaaaaaaaa&amp;', 12)).toEqual(['aaaaaaaaa', '&amp;']);
  });
  it('never cuts inside a link: not at a space in its label, but just before it', () => {
    expect(splitMessage('aaaa bbbb cccc <https://a.example/|x y z> end', 40)).toEqual(['aaaa bbbb cccc', '<https://a.example/|x y z> end']);
    expect(splitMessage('aaaa bbbb ccc<https://a.example/|x y z>', 30)).toEqual(['aaaa bbbb ccc', '<https://a.example/|x y z>']);
  });
  it('writes a link longer than a part out as text, its label then its URL', () => {
    const parts = splitMessage('<https://a.example/long/path|the label> end', 16);
    expect(parts.join('').replace(/\s/g, '')).toBe('thelabel(https://a.example/long/path)end');
    for (const part of parts) expect(part).not.toContain('<');
    expect(splitMessage('<https://a.example/long/path/x> end', 16).join('')).toBe('https://a.example/long/path/xend');
  });
  it('for any converted answer, each part is at most the limit and safe to post on its own', () => {
    fc.assert(
      fc.property(risky, fc.integer({ min: 16, max: 200 }), (markdown, limit) => {
        for (const text of [markdownToMrkdwn(markdown), escapeMrkdwn(markdown)]) {
          const parts = splitMessage(text, limit);
          for (const part of parts) {
            expect(part.length).toBeLessThanOrEqual(limit);
            expect(unsafeMrkdwn(part)).toEqual([]);
          }
          // Nothing lost but the whitespace at the cuts (and the brackets of a link too long for a part).
          const bare = (value: string) => value.replace(/```/g, '').replace(/\s/g, '');
          if (!text.includes('<')) expect(bare(parts.join(''))).toBe(bare(text));
        }
      }),
      { numRuns: 1000 },
    );
  });
  it('never cuts a code fence open: the part closes it and the next reopens it', () => {
    const code = Array.from({ length: 12 }, (_, i) => `line ${i} &lt;b&gt;`).join('\n');
    const parts = splitMessage(`intro\n\`\`\`\n${code}\n\`\`\`\nafter`, 80);
    expect(parts.length).toBeGreaterThan(2);
    for (const part of parts) {
      expect(part.length).toBeLessThanOrEqual(80);
      expect(part.split('```').length % 2).toBe(1);
      expect(part).not.toMatch(/&[a-z]*$/);
    }
    expect(parts.join('\n').replace(/```\n```\n/g, '')).toContain('line 11 &lt;b&gt;');
  });
  it('never makes a part over the limit and loses no word', () => {
    const text = Array.from({ length: 500 }, (_, i) => `w${i}`).join(' ');
    const parts = splitMessage(text, 100);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(100);
    expect(parts.join(' ').split(' ')).toEqual(text.split(' '));
  });
});
