/**
 * A runtime's Markdown as Slack mrkdwn (src/slack/mrkdwn.ts): every mention form arrives as
 * literal text wherever it stands in the Markdown, links come only from Markdown links to http,
 * https and mailto URLs, and the formatting is Slack's.
 */
import fc from 'fast-check';
import { linkTarget, markdownToMrkdwn } from '../../src/slack/mrkdwn';
import { escapeMrkdwn } from '../../src/slack/texts';
import { MENTION_FORMS, unsafeMrkdwn } from '../harness/slack';

/** Where a form can stand in Markdown, and whether it then shows whole (a table cell splits at its `|`; a comment is left out). */
const always = () => true;
const never = () => false;
const PLACES: { where: string; markdown: (form: string) => string; whole: (form: string) => boolean }[] = [
  { where: 'plain text', markdown: (form) => `hi ${form} there`, whole: always },
  { where: 'emphasis', markdown: (form) => `*${form}* and _${form}_`, whole: always },
  { where: 'strong and strike', markdown: (form) => `**${form}** and ~~${form}~~`, whole: always },
  { where: 'a heading', markdown: (form) => `# ${form}\n\n## x ${form}`, whole: always },
  { where: 'a list', markdown: (form) => `- ${form}\n  1. ${form}\n- [ ] ${form}`, whole: always },
  { where: 'a block quote', markdown: (form) => `> ${form}\n> > ${form}`, whole: always },
  { where: 'inline code', markdown: (form) => `run \`${form}\` now`, whole: always },
  { where: 'a code block', markdown: (form) => `\`\`\`sh\n${form}\n\`\`\``, whole: always },
  { where: 'an indented code block', markdown: (form) => `para\n\n    ${form}`, whole: always },
  { where: 'a link label', markdown: (form) => `[${form}](https://ok.example/)`, whole: always },
  // An alt is plain text: an autolink in it keeps its URL, not its brackets.
  { where: 'an image alt', markdown: (form) => `![${form}](https://ok.example/i.png)`, whole: (form) => !/^<(https|mailto):/.test(form) },
  { where: 'a reference link', markdown: (form) => `[${form}][r]\n\n[r]: https://ok.example/`, whole: always },
  { where: 'HTML', markdown: (form) => `<b>${form}</b>\n\n<div>\n${form}\n</div>`, whole: always },
  { where: 'an HTML comment', markdown: (form) => `a <!-- ${form} --> b\n\n<!-- ${form} -->`, whole: never },
  { where: 'a table', markdown: (form) => `| a | b |\n| - | - |\n| ${form} | x |`, whole: never },
  { where: 'a footnote', markdown: (form) => `see[^1]\n\n[^1]: ${form}`, whole: always },
];

describe('every mention form arrives as literal text', () => {
  it('in the runtime output of the report', () => {
    expect(markdownToMrkdwn('<!channel> hi <@U123> <#C1> <!here> <https://evil.example|click>')).toBe(
      '&lt;!channel&gt; hi &lt;@U123&gt; &lt;#C1&gt; &lt;!here&gt; &lt;https://evil.example|click&gt;',
    );
  });

  it.each(MENTION_FORMS)('%s, on its own', (form) => {
    expect(markdownToMrkdwn(form)).toBe(escapeMrkdwn(form));
  });

  describe.each(PLACES)('in $where', ({ markdown, whole }) => {
    it.each(MENTION_FORMS)('%s', (form) => {
      const out = markdownToMrkdwn(markdown(form));
      expect(unsafeMrkdwn(out)).toEqual([]);
      if (whole(form)) expect(out).toContain(escapeMrkdwn(form));
    });
  });

  it('escaped before the conversion, still escaped after it', () => {
    expect(markdownToMrkdwn('&lt;@U1&gt; &lt;!channel&gt; AT&amp;T')).toBe('&lt;@U1&gt; &lt;!channel&gt; AT&amp;T');
  });
});

describe("Slack's formatting", () => {
  const cases: [string, string, string][] = [
    [
      'bold, italics and strike (a zero-width space keeps them apart from a word)',
      '**b** *i* ~~s~~',
      '\u200b*b*\u200b \u200b_i_\u200b \u200b~s~\u200b',
    ],
    ['headings as bold', '# Title\n\ntext', '*Title*\n\ntext'],
    ['lists with •, nested and numbered', '- a\n- b\n  - c\n\n1. one\n2. two', '•   a\n•   b\n    •   c\n\n1.  one\n2.  two'],
    ['task lists', '- [ ] todo\n- [x] done', '•   [ ] todo\n•   [x] done'],
    ['block quotes', '> one\n> two\n\n> three', '> one\n> two\n\n> three'],
    ['code fences without the language', '```js\nconst a = 1;\n```', '```\nconst a = 1;\n```'],
    ['inline code', 'run `npm test`', 'run `npm test`'],
    ['hard line breaks as line breaks', 'one  \ntwo', 'one\ntwo'],
    ['a thematic break', 'a\n\n***\n\nb', 'a\n\n***\n\nb'],
    ['tables as rows', '| a | b |\n| - | - |\n| 1 | 2 |', '| a | b |\n| --- | --- |\n| 1 | 2 |'],
    ['HTML comments left out', 'a\n\n<!-- note -->\n\nb', 'a\n\nb'],
    ['link definitions left out', '[r]: https://ok.example/\n\ntext', 'text'],
    ['footnotes as written', 'see[^1]\n\n[^1]: note', 'see[^1]\n\n[^1]: note'],
  ];
  it.each(cases)('%s', (_, markdown, mrkdwn) => {
    expect(markdownToMrkdwn(markdown)).toBe(mrkdwn);
  });

  it('escapes &, < and > in text and in code (Slack shows an entity inside code as its character)', () => {
    expect(markdownToMrkdwn('a & b < c > d `x<y>` \n\n```\nif (a < b && c > d) {}\n```')).toBe(
      'a &amp; b &lt; c &gt; d `x&lt;y&gt;`\n\n```\nif (a &lt; b &amp;&amp; c &gt; d) {}\n```',
    );
  });
});

describe('links come only from Markdown links', () => {
  it('a Markdown link, with its label escaped', () => {
    expect(markdownToMrkdwn('[the docs](https://docs.example/a)')).toBe('<https://docs.example/a|the docs>');
    expect(markdownToMrkdwn('[a <b> & **c**](https://docs.example/)')).toBe('<https://docs.example/|a &lt;b&gt; &amp; c>');
    expect(markdownToMrkdwn('[x][ref]\n\n[ref]: https://docs.example/r')).toBe('<https://docs.example/r|x>');
    expect(markdownToMrkdwn('![diagram](https://docs.example/d.png)')).toBe('<https://docs.example/d.png|diagram>');
  });

  it('an autolink whose label is its URL, as the URL alone', () => {
    expect(markdownToMrkdwn('<https://docs.example/a>')).toBe('<https://docs.example/a>');
    expect(markdownToMrkdwn('see https://docs.example/a?x=1&y=2 now')).toBe('see <https://docs.example/a?x=1&amp;y=2> now');
    expect(markdownToMrkdwn('[https://docs.example/a](https://docs.example/a)')).toBe('<https://docs.example/a>');
  });

  it('mailto links', () => {
    expect(markdownToMrkdwn('[write](mailto:x@y.example)')).toBe('<mailto:x@y.example|write>');
    expect(markdownToMrkdwn('<x@y.example>')).toBe('<mailto:x@y.example|x@y.example>');
  });

  it('raw `<url|label>` is Slack syntax, not Markdown: it shows as text', () => {
    expect(markdownToMrkdwn('<https://evil.example|click> <mailto:x@y|z>')).toBe('&lt;https://evil.example|click&gt; &lt;mailto:x@y|z&gt;');
  });

  it.each([
    'javascript:alert(1)',
    'data:text/html,hi',
    'ftp://files.example/x',
    'file:///etc/passwd',
    'slack://open',
    '/relative',
    'vbscript:x',
  ])('a link to %s shows as its escaped label', (url) => {
    expect(markdownToMrkdwn(`[click <here>](${url})`)).toBe('click &lt;here&gt;');
  });

  it('a URL cannot close or split its link: >, |, <, spaces and & encoded, existing %XX kept', () => {
    expect(markdownToMrkdwn('[x](<https://a.example/p q|r?s=1&t=2>)')).toBe('<https://a.example/p%20q%7Cr?s=1&amp;t=2|x>');
    expect(markdownToMrkdwn('[x](https://a.example/a&gt;b&lt;c)')).toBe('<https://a.example/a%3Eb%3Cc|x>');
    expect(markdownToMrkdwn('[x](https://a.example/p%20q%7Cr%3E)')).toBe('<https://a.example/p%20q%7Cr%3E|x>');
    expect(markdownToMrkdwn('[x](<mailto:x@y.example?subject=a|b c>)')).toBe('<mailto:x@y.example?subject=a%7Cb%20c|x>');
  });
});

describe('linkTarget', () => {
  it('takes only absolute http, https and mailto URLs', () => {
    expect(linkTarget('https://a.example/x')).toBe('https://a.example/x');
    expect(linkTarget('HTTP://A.example')).toBe('http://a.example/');
    expect(linkTarget('mailto:x@y.example')).toBe('mailto:x@y.example');
    for (const url of [
      'javascript:alert(1)',
      'java\tscript:alert(1)',
      ' javascript:x',
      'data:,x',
      'ftp://a.example',
      '//a.example',
      'a.example',
      '',
    ]) {
      expect(linkTarget(url)).toBeUndefined();
    }
  });

  it('writes the host as punycode and other non-ASCII percent-encoded, so the link shows where it goes', () => {
    expect(linkTarget('https://exämple.example/päth\u202e')).toBe('https://xn--exmple-cua.example/p%C3%A4th%E2%80%AE');
  });
});

/** Markdown with Slack's syntax, mention forms and escapes mixed in, in any order, with any text between. */
const markdownish = fc
  .array(
    fc.oneof(
      fc.constantFrom(
        ...MENTION_FORMS,
        '[',
        '](',
        ')',
        '](https://ok.example/',
        '](mailto:a@b.example',
        '<https://ok.example/',
        '>',
        '<',
        '|',
        '**',
        '*',
        '_',
        '~~',
        '`',
        '```\n',
        '\n    ',
        '> ',
        '- ',
        '1. ',
        '# ',
        '<!--',
        '-->',
        '<b>',
        '&lt;',
        '&amp;',
        '&',
        '!',
        '@',
        '#',
        '\\',
        '\n',
        '\n\n',
        ' ',
        'https://',
        'www.',
        'x@y.example',
        '[^1]',
        '[^1]: ',
        '| - |',
      ),
      fc.string({ maxLength: 8 }),
    ),
    { maxLength: 40 },
  )
  .map((pieces) => pieces.join(''));

describe('for any input', () => {
  it('every < opens a link written as a Markdown link, and no <!, <@ or <# appears', () => {
    fc.assert(
      fc.property(fc.oneof(markdownish, fc.string({ unit: 'grapheme', maxLength: 200 })), (markdown) => {
        expect(unsafeMrkdwn(markdownToMrkdwn(markdown))).toEqual([]);
      }),
      { numRuns: 2000 },
    );
  });
});
