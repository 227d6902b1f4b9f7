/**
 * The platform's own descriptor: the smoke-test workflow (workflows/ping.ts) and its activity,
 * which prove the front door → Temporal → worker → activity round trip.
 */
import path from 'node:path';
import { defineFeature } from '../app/feature';
import { createPlatformActivities } from '../../activities/platform';

export const platformFeature = defineFeature({
  name: 'platform',
  workflows: path.join(__dirname, '..', '..', 'workflows', 'ping'),
  activities: () => createPlatformActivities(),
});
