/**
 * Conditional GETs (RFC 9110): a representation's entity tag, and whether the client's
 * `If-None-Match` names it, so a route answers 304 without a body. Pure.
 */
import { createHash } from 'node:crypto';

/** A strong entity tag for a representation: the quoted base64url SHA-256 of its bytes. */
export function entityTag(representation: string): string {
  return `"${createHash('sha256').update(representation).digest('base64url')}"`;
}

// An entity tag as RFC 9110 writes it: an optional weak prefix, then any characters but a quote between quotes.
const ENTITY_TAG = /(?:W\/)?"([^"]*)"/g;

/**
 * The client's copy is current: `If-None-Match` is `*`, or lists a tag equal to `etag` by the weak
 * comparison, which compares the opaque parts whether either tag is weak (RFC 9110 §13.1.2).
 * A header that lists no well-formed tag matches nothing.
 */
export function notModified(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false;
  if (ifNoneMatch.trim() === '*') return true;
  const opaque = (tag: string) => tag.replace(/^W\//, '');
  const wanted = opaque(etag);
  return [...ifNoneMatch.matchAll(ENTITY_TAG)].some((m) => `"${m[1]}"` === wanted);
}
