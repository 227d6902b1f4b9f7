/**
 * The App's install flow as the installer's browser and GitHub see it. GitHub's install page for
 * the App is on GitHub's web host (derived from GITHUB_API_BASE_URL as `@octokit/oauth-methods`
 * derives its OAuth host); with *Request user authorization (OAuth) during installation* on,
 * GitHub then sends the installer to the App's Callback URL with a `code`, which
 * `exchangeWebFlowCode` trades for a user access token. The installation is the installer's only
 * when `GET /user/installations`, asked with that token, lists it: the `installation_id` on the
 * callback's address can be spoofed.
 *
 * The user token lives in this module's local variables only: it is never stored, logged or
 * returned, and a failure surfaces as a code and GitHub's message.
 */
import { exchangeWebFlowCode } from '@octokit/oauth-methods';
import { request as octokitRequest } from '@octokit/request';

/** The install flow's state: its purpose (src/app/install-flow.ts) and how long an install link works. */
export const INSTALL_FLOW = { purpose: 'github_install', ttlMs: 10 * 60_000 } as const;

/** At most this many pages of 100 installations are read for one installer. */
const MAX_INSTALLATION_PAGES = 20;

/**
 * GitHub's web host for an API base URL: `https://github.com` for github.com's API, the host
 * without `api.` for GitHub Enterprise Cloud with data residency (`https://api.X.ghe.com`), and
 * the base without `/api/v3` for GitHub Enterprise Server and anything else.
 */
export function githubWebBaseUrl(apiBaseUrl: string): string {
  const base = apiBaseUrl.replace(/\/+$/, '');
  if (/^https:\/\/(api\.)?github\.com$/.test(base)) return 'https://github.com';
  if (/^https:\/\/api\.[^/]+\.ghe\.com$/.test(base)) return base.replace('https://api.', 'https://');
  return base.replace(/\/api\/v3$/, '');
}

/** GitHub's page that installs the App, carrying our state back to the Callback URL. */
export function appInstallUrl(webBaseUrl: string, slug: string, state: string): string {
  return `${webBaseUrl}/apps/${encodeURIComponent(slug)}/installations/new?state=${encodeURIComponent(state)}`;
}

export interface InstallerClientSettings {
  apiBaseUrl: string;
  clientId: string;
  clientSecret: string;
}

/** Why the installer could not be checked: GitHub refused (a bad or used code) or could not answer. */
export type InstallerFailure = { ok: false; failure: 'refused' | 'unavailable'; code: string; message: string };

export type InstallerCheck = { ok: true; visible: true; account: string | null } | { ok: true; visible: false } | InstallerFailure;

type HttpFailure = { name?: string; status?: number; message?: string; response?: { data?: { error?: unknown } } };

/** An OAuth error answer (GitHub's 200 with `error`, which the library raises as a 400) or a 4xx is a refusal; the rest is an outage. */
function classify(error: unknown, step: string): InstallerFailure {
  const e = error as HttpFailure;
  if (e?.name !== 'HttpError') return { ok: false, failure: 'unavailable', code: `${step}_network`, message: String(e?.message ?? error) };
  const oauthError = e.response?.data?.error;
  if (typeof oauthError === 'string') return { ok: false, failure: 'refused', code: oauthError, message: e.message ?? oauthError };
  const status = e.status ?? 0;
  const failure = status >= 400 && status < 500 && status !== 429 ? 'refused' : 'unavailable';
  return { ok: false, failure, code: `${step}_${status}`, message: (e.message ?? `HTTP ${status}`).slice(0, 300) };
}

type InstallationsPage = { installations: { id: number; account: { login?: string } | null }[] };

export function createInstallerClient(settings: InstallerClientSettings) {
  const base = octokitRequest.defaults({
    baseUrl: settings.apiBaseUrl,
    headers: { 'user-agent': 'den-control-plane', 'x-github-api-version': '2022-11-28' },
  });

  /** Walks the installer's installations of the App, page by page, until it finds this one. */
  async function findInstallation(token: string, installationId: number): Promise<{ account: string | null } | undefined> {
    const asUser = base.defaults({ headers: { authorization: `token ${token}` } });
    for (let page = 1; page <= MAX_INSTALLATION_PAGES; page++) {
      const response = await asUser('GET /user/installations', { per_page: 100, page });
      const { installations } = response.data as InstallationsPage;
      const found = installations.find((i) => i.id === installationId);
      if (found) return { account: found.account?.login ?? null };
      if (installations.length < 100 || !/rel="next"/.test(String(response.headers.link ?? ''))) return undefined;
    }
    return undefined;
  }

  return {
    /** Exchanges the callback's code and asks GitHub whether the installer can see the installation. */
    async checkInstaller(code: string, installationId: number): Promise<InstallerCheck> {
      let token: string;
      try {
        const exchanged = await exchangeWebFlowCode({
          clientType: 'github-app',
          clientId: settings.clientId,
          clientSecret: settings.clientSecret,
          code,
          request: base,
        });
        token = exchanged.authentication.token;
      } catch (error) {
        return classify(error, 'token');
      }
      try {
        const found = await findInstallation(token, installationId);
        return found ? { ok: true, visible: true, account: found.account } : { ok: true, visible: false };
      } catch (error) {
        return classify(error, 'installations');
      }
    },
  };
}

export type InstallerClient = ReturnType<typeof createInstallerClient>;
