/** Conditional GETs: entity tags and If-None-Match (RFC 9110 §13.1.2), as pure functions. */
import { entityTag, notModified } from '../../src/app/http/conditional';

describe('entityTag', () => {
  it('is a quoted, strong tag that follows the representation', () => {
    const tag = entityTag('{"a":1}');
    expect(tag).toMatch(/^"[A-Za-z0-9_-]{43}"$/);
    expect(entityTag('{"a":1}')).toBe(tag);
    expect(entityTag('{"a":2}')).not.toBe(tag);
  });
});

describe('notModified', () => {
  const etag = '"abc"';

  it.each([
    ['the same tag', '"abc"', true],
    ['the tag among others', '"x", "abc" , "y"', true],
    ['the weak form of the tag (weak comparison)', 'W/"abc"', true],
    ['*', '*', true],
    ['*, with spaces', ' * ', true],
    ['another tag', '"abd"', false],
    ['the tag unquoted', 'abc', false],
    ['a tag that contains the tag', '"abcd"', false],
    ['a tag with a comma inside it', '"abc,x"', false],
    ['an empty header', '', false],
  ])('%s → %s', (_label, header, expected) => {
    expect(notModified(header, etag)).toBe(expected);
  });

  it('no header → the representation is sent', () => {
    expect(notModified(undefined, etag)).toBe(false);
  });

  it('compares a weak etag of ours by its opaque part too', () => {
    expect(notModified('"abc"', 'W/"abc"')).toBe(true);
  });
});
