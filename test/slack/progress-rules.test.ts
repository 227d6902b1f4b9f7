/** The pure rules of an invocation's message: the throttle, what progress shows, and the split. */
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
    expect(progressText({ tool: 'web<search>' })).toBe('_using web&lt;search&gt;…_');
    expect(progressText({ text: '  ' })).toBe(WORKING_TEXT);
    expect(progressText({ text: 'x'.repeat(5000) })).toHaveLength(MESSAGE_TEXT_LIMIT);
  });
  it('a Cancel button carrying the run id while it works, none at the end', () => {
    expect(progressBlocks('t', 'run-1')[1]).toMatchObject({ elements: [{ action_id: CANCEL_ACTION_ID, value: 'run-1' }] });
    expect(finalBlocks('t')).toEqual([{ type: 'section', text: { type: 'mrkdwn', text: 't' } }]);
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
  it('never makes a part over the limit and loses no word', () => {
    const text = Array.from({ length: 500 }, (_, i) => `w${i}`).join(' ');
    const parts = splitMessage(text, 100);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(100);
    expect(parts.join(' ').split(' ')).toEqual(text.split(' '));
  });
});
