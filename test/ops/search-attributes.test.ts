import { randomUUID } from 'node:crypto';
import { msToTs } from '@temporalio/common/lib/time';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/log';
import { createTemporalClient } from '../../src/temporal/client';
import { searchAttributes } from '../../src/temporal/messages';
import { ensureSearchAttributes } from '../../src/temporal/search-attributes';

it('registers missing custom search attributes once, idempotently (production servers take no flags)', async () => {
  const config = loadConfig();
  const temporal = createTemporalClient({ address: config.temporal.address!, namespace: 'default', taskQueue: 'unused' });
  const namespace = `sa-${randomUUID()}`;
  try {
    await temporal.connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
    const log = createLogger({ level: 'silent' });
    const first = await ensureSearchAttributes(temporal.connection, namespace, log);
    expect(first.sort()).toEqual(Object.values(searchAttributes).map((k) => k.name).sort());
    const listed = await temporal.connection.operatorService.listSearchAttributes({ namespace });
    for (const key of Object.values(searchAttributes)) expect(listed.customAttributes).toHaveProperty(key.name);
    expect(await ensureSearchAttributes(temporal.connection, namespace, log)).toEqual([]);
  } finally {
    await temporal.close();
  }
});
