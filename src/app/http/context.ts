import type { RouterContext } from '@koa/router';
import type { Logger } from '../log';
import type { Principal } from './auth';

/** Per-request state that middleware fills in. Services never travel here: features close over theirs. */
export interface AppState {
  requestId: string;
  log: Logger;
  /** The client's address: the socket's peer, or the client a trusted proxy names (src/app/http/client-address.ts). */
  clientAddress: string;
  /** The OpenAPI path template, for metrics and logs (never the raw URL with ids in it). */
  routeTemplate?: string;
  principal?: Principal;
}

export type AppContext = RouterContext<AppState>;
