import { OpenAPIRegistry, OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import './zod';
import { registerOpenApi, type Route } from './route';

/** The document of one app, from the same schemas that validate its routes' requests. */
export function createOpenApi(routes: Route[]) {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'bearerAuth', {
    type: 'http',
    scheme: 'bearer',
    description:
      'A session token, `Authorization: Bearer <session-token>`; or, on the automation-run routes, a runner token ' +
      '(`Bearer den_rt_…`, from `POST /v1/automation-runners/token`).',
  });
  registry.registerComponent('securitySchemes', 'denApiKey', {
    type: 'apiKey',
    in: 'header',
    name: 'x-api-key',
    description: 'An organization API key (`den_…`), sent raw, without a Bearer prefix.',
  });
  for (const route of routes) registerOpenApi(registry, route);
  let cached: object | undefined;
  return {
    registry,
    document(): object {
      cached ??= new OpenApiGeneratorV31(registry.definitions).generateDocument({
        openapi: '3.1.0',
        info: {
          title: 'den control plane — ingress',
          version: '0.18.46',
          description: 'Slack and GitHub webhooks, automation-run reporting and MCP resolve.',
        },
        servers: [{ url: '/' }],
        // Either credential is accepted by default (a session or an API key); routes override with their own `security`.
        security: [{ bearerAuth: [] }, { denApiKey: [] }],
      });
      return cached;
    },
  };
}
