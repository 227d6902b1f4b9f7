import type { RouterContext } from '@koa/router';
import type { Logger } from '../log';
import type { Principal } from '../../identity/auth';
import type { Services } from './services';

/** Per-request state that middleware fills in. */
export interface AppState {
  requestId: string;
  log: Logger;
  /** The OpenAPI path template, for metrics and logs (never the raw URL with ids in it). */
  routeTemplate?: string;
  principal?: Principal;
  services: Services;
  /** The OpenAPI document of this app (generated once, from the route schemas). */
  openapiDocument: () => object;
}

export type AppContext = RouterContext<AppState>;
