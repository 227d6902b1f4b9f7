import type { Next } from 'koa';
import type { AppContext } from '../context';

/**
 * What the API reference page at /docs may load: its own scripts (Swagger UI's bundle and its
 * init script, no inline script), its own stylesheet plus the inline styles Swagger UI's rendering
 * sets, the data: images its stylesheet embeds, and requests back to this origin (the OpenAPI
 * document and "Try it out"). Nothing may frame it.
 */
const DOCS_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * Every response, errors included, says `X-Content-Type-Options: nosniff`; the /docs page and its
 * assets also carry DOCS_CONTENT_SECURITY_POLICY and `X-Frame-Options: DENY`. Set before the
 * routes run, so whatever answers (a route, the error mapper, a 404) keeps them.
 */
export async function securityHeaders(ctx: AppContext, next: Next): Promise<void> {
  ctx.set('x-content-type-options', 'nosniff');
  if (ctx.path === '/docs' || ctx.path.startsWith('/docs/')) {
    ctx.set('content-security-policy', DOCS_CONTENT_SECURITY_POLICY);
    ctx.set('x-frame-options', 'DENY');
  }
  await next();
}
