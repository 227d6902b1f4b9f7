/**
 * Replay defence for GitHub deliveries. GitHub signs the body but not `X-GitHub-Delivery`, so a
 * captured body could be replayed under fresh delivery ids; each accepted body's sha256 is
 * recorded per installation with the delivery id that first carried it, and the same body under
 * another id is a replay. GitHub's own redelivery keeps the id, so it passes here and is deduped
 * by the workflow id as before.
 */
import { createHash } from 'node:crypto';
import { AppError, errors } from '../app/errors';
import type { Db } from '../app/store/db';

/** Where a repository webhook (no installation) records its digests. */
const NO_INSTALLATION = 0;

export const bodyDigest = (rawBody: Buffer): string => createHash('sha256').update(rawBody).digest('hex');

/**
 * Records the digest for this delivery id, or finds the id that recorded it first; true when that
 * id is this delivery's. One upsert, so concurrent replays on any replica agree on the first id.
 */
export async function claimDigest(
  db: Db,
  delivery: { installationId: number | null; digest: string; deliveryId: string; now: number },
): Promise<boolean> {
  try {
    const row = await db
      .insertInto('github_delivery_digests')
      .values({
        installation_id: delivery.installationId ?? NO_INSTALLATION,
        body_sha256: delivery.digest,
        delivery_id: delivery.deliveryId,
        created_at: new Date(delivery.now),
      })
      // A no-op update, so the conflicting row's delivery id comes back (DO NOTHING returns no row).
      .onConflict((oc) =>
        oc
          .columns(['installation_id', 'body_sha256'])
          .doUpdateSet((eb) => ({ delivery_id: eb.ref('github_delivery_digests.delivery_id') })),
      )
      .returning('delivery_id')
      .executeTakeFirstOrThrow();
    return row.delivery_id === delivery.deliveryId;
  } catch (error) {
    throw error instanceof AppError ? error : errors.unavailable('postgres', error);
  }
}
