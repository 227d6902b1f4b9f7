/**
 * API keys, session tokens and runner tokens. Only SHA-256 hashes are stored; lookups go by hash, and the
 * found hash is compared again in constant time so no timing difference leaks through a
 * database index.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { typeid } from 'typeid-js';

const API_KEY_PREFIX = 'den_';
/** `den_` + base64url(32 random bytes) = 47 characters. */
const API_KEY_SHAPE = /^den_[A-Za-z0-9_-]{43,}$/;
const SESSION_TOKEN_SHAPE = /^[A-Za-z0-9_-]{43,}$/;
/** Runner tokens are sent as `Authorization: Bearer`, like sessions: the prefix tells them apart. */
export const RUNNER_TOKEN_PREFIX = 'den_rt_';
/** `den_rt_` + base64url(32 random bytes) = 50 characters. */
const RUNNER_TOKEN_SHAPE = /^den_rt_[A-Za-z0-9_-]{43}$/;

export function hashSecret(raw: string): string {
  return createHash('sha256').update(raw, 'utf8').digest('hex');
}

export function hashesEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

export function newApiKey(): { raw: string; hash: string; prefix: string } {
  const raw = `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  return { raw, hash: hashSecret(raw), prefix: raw.slice(0, 8) };
}

export function newSessionToken(): { raw: string; hash: string } {
  const raw = randomBytes(32).toString('base64url');
  return { raw, hash: hashSecret(raw) };
}

export function newRunnerToken(): { raw: string; hash: string } {
  const raw = `${RUNNER_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
  return { raw, hash: hashSecret(raw) };
}

export const isWellFormedApiKey = (value: string) => API_KEY_SHAPE.test(value);
export const isWellFormedSessionToken = (value: string) => SESSION_TOKEN_SHAPE.test(value);
export const isWellFormedRunnerToken = (value: string) => RUNNER_TOKEN_SHAPE.test(value);

export const newId = (prefix: 'org' | 'usr' | 'mem' | 'key' | 'ses' | 'rnr') => typeid(prefix).toString();
