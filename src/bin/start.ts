import { main } from './main';

// All-in-one: embedded Temporal and Postgres where their addresses are unset, worker and API.
void main({ name: 'den', roles: { api: true, worker: true }, allowEmbedded: () => true });
