/** What the installation routes share: the `not_configured` answer. */
import { z } from '../../app/http/zod';

export const NOT_CONFIGURED_MESSAGE =
  'The App install flow is not configured (GITHUB_APP_SLUG, GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET); an operator can bind an installation with `den github installations bind`.';

export const NotConfigured = z.object({ error: z.literal('not_configured'), message: z.string() }).openapi('GithubInstallNotConfigured');
