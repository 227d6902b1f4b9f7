/**
 * The service secret: encrypts secrets at rest (AES-256-GCM) and signs tokens (HMAC).
 * SECRET_KEY in production; in embedded mode it is generated once and kept under DATA_DIR.
 *
 * Rotation: set the new key as SECRET_KEY and the old one as SECRET_KEY_PREVIOUS. Everything new
 * is sealed and signed with SECRET_KEY; what was sealed or signed with either key still opens.
 * `den secrets rotate` then re-seals every stored secret with SECRET_KEY, after which
 * SECRET_KEY_PREVIOUS can go.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { AppError } from './errors';

/** The key that seals and signs, and the one before it, which only opens and verifies. */
export interface SecretKeys {
  current: Buffer;
  previous?: Buffer;
}

/** Every key that may open what is stored or verify what was signed, current first. */
export const openingKeys = (keys: SecretKeys | Buffer): Buffer[] =>
  Buffer.isBuffer(keys) ? [keys] : [keys.current, ...(keys.previous ? [keys.previous] : [])];

const sealingKey = (keys: SecretKeys | Buffer): Buffer => (Buffer.isBuffer(keys) ? keys : keys.current);

/**
 * An HMAC-SHA256 of `data` under a key derived from the secret for one purpose only (`purpose`, a
 * versioned label such as `den/install-flow-state/v1`): a token signed for one use never verifies
 * as another.
 */
export function purposeMac(secretKey: Buffer, purpose: string, data: string): Buffer {
  const key = createHmac('sha256', secretKey).update(purpose).digest();
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

export function parseSecretKey(value: string): Buffer {
  const key = /^[0-9a-f]{64}$/i.test(value) ? Buffer.from(value, 'hex') : Buffer.from(value, 'base64');
  if (key.length !== 32) throw new Error('SECRET_KEY must be 32 bytes, as 64 hex characters or base64');
  return key;
}

export async function loadSecretKeys(options: {
  configured: string | undefined;
  previous: string | undefined;
  dataDir: string;
  embedded: boolean;
}): Promise<SecretKeys> {
  const current = await loadSecretKey(options);
  return options.previous ? { current, previous: parseSecretKey(options.previous) } : { current };
}

async function loadSecretKey(options: { configured: string | undefined; dataDir: string; embedded: boolean }): Promise<Buffer> {
  if (options.configured) return parseSecretKey(options.configured);
  if (!options.embedded) throw new Error('SECRET_KEY is required when not running embedded (EMBEDDED=true)');
  const file = path.join(options.dataDir, 'secret.key');
  try {
    return parseSecretKey((await fs.readFile(file, 'utf8')).trim());
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    const key = randomBytes(32);
    await fs.mkdir(options.dataDir, { recursive: true });
    // 'wx': if two processes race, the loser reads the winner's key.
    await fs.writeFile(file, key.toString('hex'), { mode: 0o600, flag: 'wx' }).catch(() => undefined);
    return parseSecretKey((await fs.readFile(file, 'utf8')).trim());
  }
}

/** AES-256-GCM; output is base64url(iv ‖ tag ‖ ciphertext), prefixed with a version. */
export function encryptSecret(keys: SecretKeys | Buffer, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', sealingKey(keys), iv);
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return `v1.${Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString('base64url')}`;
}

/**
 * Opens a sealed secret with the current key, else the previous one. Neither: a 503 naming the
 * secret key (the deployment's configuration is wrong, and retrying after it is fixed works),
 * never a 500, and never the secret in the message.
 */
export function decryptSecret(keys: SecretKeys | Buffer, sealed: string): string {
  for (const key of openingKeys(keys)) {
    const opened = tryDecrypt(key, sealed);
    if (opened !== undefined) return opened;
  }
  throw new AppError('secret_undecryptable', 503, {
    body: {
      error: 'unavailable',
      dependency: 'secret_key',
      message: 'A stored secret cannot be decrypted with SECRET_KEY or SECRET_KEY_PREVIOUS.',
    },
    headers: { 'retry-after': '30' },
    dependency: 'secret_key',
  });
}

/** Whether `sealed` opens with this very key (den secrets rotate: already current?). */
export function tryDecrypt(key: Buffer, sealed: string): string | undefined {
  if (!sealed.startsWith('v1.')) return undefined;
  try {
    const data = Buffer.from(sealed.slice(3), 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, 12));
    decipher.setAuthTag(data.subarray(12, 28));
    return Buffer.concat([decipher.update(data.subarray(28)), decipher.final()]).toString('utf8');
  } catch {
    return undefined;
  }
}
