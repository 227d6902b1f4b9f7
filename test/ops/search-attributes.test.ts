import { randomUUID } from 'node:crypto';
import { msToTs } from '@temporalio/common/lib/time';
import { loadConfig } from '../../src/main/config';
import { createLogger } from '../../src/app/log';
import { createTemporalClient } from '../../src/app/temporal/client';
import { SEARCH_ATTRIBUTES } from '../../src/main/features';
import { ensureSearchAttributes } from '../../src/app/temporal/search-attributes';

it('registers missing custom search attributes once, idempotently (production servers take no flags)', async () => {
  const config = loadConfig();
  const temporal = createTemporalClient({ address: config.temporal.address!, namespace: 'default', taskQueue: 'unused' });
  const namespace = `sa-${randomUUID()}`;
  try {
    await temporal.connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
    const log = createLogger({ level: 'silent' });
    const first = await ensureSearchAttributes({ connection: temporal.connection, namespace }, SEARCH_ATTRIBUTES, log);
    expect(first.sort()).toEqual(SEARCH_ATTRIBUTES.map((k) => k.name).sort());
    const listed = await temporal.connection.operatorService.listSearchAttributes({ namespace });
    for (const key of SEARCH_ATTRIBUTES) expect(listed.customAttributes).toHaveProperty(key.name);
    expect(await ensureSearchAttributes({ connection: temporal.connection, namespace }, SEARCH_ATTRIBUTES, log)).toEqual([]);
  } finally {
    await temporal.close();
  }
});
