import { main } from './main';

// The Temporal worker only: scale it out by running more of these.
void main({ name: 'den-worker', roles: { api: false, worker: true }, allowEmbedded: (config) => config.embeddedAllowed });
