/**
 * The service secret: encrypts secrets at rest (AES-256-GCM) and signs tokens (HMAC).
 * SECRET_KEY in production; in embedded mode it is generated once and kept under DATA_DIR.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

export function parseSecretKey(value: string): Buffer {
  const key = /^[0-9a-f]{64}$/i.test(value) ? Buffer.from(value, 'hex') : Buffer.from(value, 'base64');
  if (key.length !== 32) throw new Error('SECRET_KEY must be 32 bytes, as 64 hex characters or base64');
  return key;
}

export async function loadSecretKey(options: { configured: string | undefined; dataDir: string; embedded: boolean }): Promise<Buffer> {
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
export function encryptSecret(key: Buffer, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return `v1.${Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString('base64url')}`;
}

export function decryptSecret(key: Buffer, sealed: string): string {
  if (!sealed.startsWith('v1.')) throw new Error('unknown secret format');
  const data = Buffer.from(sealed.slice(3), 'base64url');
  const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, 12));
  decipher.setAuthTag(data.subarray(12, 28));
  return Buffer.concat([decipher.update(data.subarray(28)), decipher.final()]).toString('utf8');
}
