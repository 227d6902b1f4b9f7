/**
 * The platform's own descriptor: it names the smoke-test workflow's place in the worker
 * (src/main/worker-code.ts runs workflows/ping.ts and its activity), which proves the front door
 * → Temporal → worker → activity round trip.
 */
import { defineFeature } from '../app/feature';

export const platformFeature = defineFeature({ name: 'platform' });
