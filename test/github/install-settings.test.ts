/**
 * The install flow's pure parts: GitHub's web host derived from GITHUB_API_BASE_URL exactly as
 * `@octokit/oauth-methods` derives its OAuth host, the install link, and the settings that turn
 * the flow on (all three or none).
 */
import { getWebFlowAuthorizationUrl } from '@octokit/oauth-methods';
import { request } from '@octokit/request';
import { appInstallUrl, githubWebBaseUrl } from '../../src/github/oauth';
import { githubSettings } from '../../src/github/settings';

/** Where the library sends a user to authorize, without its path and query: the web host it derived. */
function libraryWebBase(apiBaseUrl: string): string {
  const { url } = getWebFlowAuthorizationUrl({
    clientType: 'github-app',
    clientId: 'Iv1.x',
    request: request.defaults({ baseUrl: apiBaseUrl }),
  });
  return url.slice(0, url.indexOf('/login/oauth/authorize'));
}

it.each([
  ['https://api.github.com', 'https://github.com'],
  ['https://api.acme.ghe.com', 'https://acme.ghe.com'],
  ['https://ghe.example.com/api/v3', 'https://ghe.example.com'],
  ['http://127.0.0.1:4567', 'http://127.0.0.1:4567'],
])('the web host of %s is %s, as @octokit/oauth-methods derives it', (api, web) => {
  expect(githubWebBaseUrl(api)).toBe(web);
  expect(libraryWebBase(api)).toBe(web);
});

it('the install link names the App and carries the state, encoded', () => {
  expect(appInstallUrl('https://github.com', 'den-sync', 'a.b_c-d')).toBe(
    'https://github.com/apps/den-sync/installations/new?state=a.b_c-d',
  );
  expect(appInstallUrl('https://github.com', 'x', 'a+b/c')).toBe('https://github.com/apps/x/installations/new?state=a%2Bb%2Fc');
});

describe('GITHUB_APP_SLUG, GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET', () => {
  const all = { GITHUB_APP_SLUG: 'den-sync', GITHUB_CLIENT_ID: 'Iv23liabc', GITHUB_CLIENT_SECRET: 'shh' };

  it('all three turn the install flow on, with the web host of the API base', () => {
    const parsed = githubSettings.parse({ ...all, GITHUB_API_BASE_URL: 'https://ghe.example.com/api/v3' });
    expect(parsed).toEqual({
      ok: true,
      settings: expect.objectContaining({
        install: { slug: 'den-sync', clientId: 'Iv23liabc', clientSecret: 'shh', webBaseUrl: 'https://ghe.example.com' },
      }),
    });
  });

  it('none leaves it off; some of them is a configuration problem naming the missing ones', () => {
    expect(githubSettings.parse({})).toMatchObject({ ok: true, settings: { install: undefined } });
    expect(githubSettings.parse({ GITHUB_APP_SLUG: 'den-sync' })).toEqual({
      ok: false,
      problems: ['GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET: required with GITHUB_APP_SLUG'],
    });
    expect(githubSettings.parse({ ...all, GITHUB_APP_SLUG: 'Not A Slug' })).toMatchObject({ ok: false });
  });
});
