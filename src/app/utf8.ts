/**
 * UTF-8 lengths without Node's Buffer or TextEncoder, so the modules workflows import (their
 * sandbox has neither) count bytes as the platforms do: Temporal's payload limits, Slack's
 * streamed-message size.
 */

/**
 * Bytes of a string once encoded as UTF-8 (a CJK character is 1 UTF-16 unit but 3 bytes). Pure and
 * deterministic.
 */
export function utf8Bytes(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      // A surrogate pair is one code point of 4 bytes; a lone surrogate is encoded as U+FFFD (3).
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i += 1;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}
