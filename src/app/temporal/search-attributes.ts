/**
 * Production Temporal servers don't take `--search-attribute` flags, so every process registers
 * the service's custom search attributes at start-up when they are missing. Idempotent; safe to
 * run from many replicas at once (a concurrent add of the same name is treated as done).
 */
import type { Connection } from '@temporalio/client';
import type { defineSearchAttributeKey } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import type { Logger } from '../log';

export type SearchAttributeKey = ReturnType<typeof defineSearchAttributeKey>;

const INDEXED_TYPE: Record<string, temporal.api.enums.v1.IndexedValueType> = {
  KEYWORD: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  INT: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_INT,
};

/** The namespace whose search attributes are ensured, and the connection that reaches it. */
export interface NamespaceConnection {
  connection: Connection;
  namespace: string;
}

export async function ensureSearchAttributes(
  { connection, namespace }: NamespaceConnection,
  keys: readonly SearchAttributeKey[],
  log: Logger,
): Promise<string[]> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const known = new Set([...Object.keys(existing.customAttributes ?? {}), ...Object.keys(existing.systemAttributes ?? {})]);
  const missing = keys.filter((key) => !known.has(key.name));
  if (missing.length === 0) return [];
  try {
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map((key) => [key.name, INDEXED_TYPE[key.type]!])),
    });
  } catch (error) {
    // ALREADY_EXISTS: another replica registered them first.
    if ((error as { code?: number }).code !== 6) throw error;
  }
  log.info({ added: missing.map((k) => k.name) }, 'registered Temporal search attributes');
  return missing.map((k) => k.name);
}
