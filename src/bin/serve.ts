import { main } from './main';

// The API only: stateless, scale it out behind a load balancer.
void main({ name: 'den-api', roles: { api: true, worker: false }, allowEmbedded: (config) => config.embeddedAllowed });
