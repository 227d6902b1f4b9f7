import { deliverySearchValues } from '../../src/github/delivery';
import { IGNORED, classifyDelivery, parseWebhookBody, readDeliveryHeaders } from '../../src/github/relevance';
import { githubExample } from '../harness/github';

const delivery = (event: string) => ({ event, deliveryId: '72d3162e-cc78-11e3-81ab-4c9367dc0958', receivedAt: 1_700_000_000_000 });
const HEAD = '6113728f27ae82c7b1a177c8d03f9e96e0adf246';
const branchPush = () => githubExample('push', (p) => p.ref === 'refs/heads/master' && p.installation);

describe('readDeliveryHeaders', () => {
  it('needs X-GitHub-Event, then X-GitHub-Delivery', () => {
    expect(readDeliveryHeaders({})).toEqual({ ok: false, reason: IGNORED.missingEventHeader });
    expect(readDeliveryHeaders({ 'x-github-event': 'push' })).toEqual({ ok: false, reason: IGNORED.missingDeliveryHeader });
    expect(readDeliveryHeaders({ 'x-github-event': ' ', 'x-github-delivery': 'abc' })).toEqual({
      ok: false,
      reason: IGNORED.missingEventHeader,
    });
    expect(readDeliveryHeaders({ 'x-github-event': 'push', 'x-github-delivery': 'abc' })).toEqual({
      ok: true,
      event: 'push',
      deliveryId: 'abc',
    });
  });

  it('refuses delivery ids that could not be GitHub GUIDs', () => {
    for (const id of ['a/b', 'x'.repeat(129), '../etc', 'a b']) {
      expect(readDeliveryHeaders({ 'x-github-event': 'push', 'x-github-delivery': id })).toEqual({
        ok: false,
        reason: IGNORED.invalidDeliveryHeader,
      });
    }
  });
});

describe('classifyDelivery on real GitHub payloads', () => {
  it('accepts a branch push with everything a sync needs', () => {
    const result = classifyDelivery(delivery('push'), branchPush());
    expect(result).toEqual({
      accepted: true,
      event: 'push',
      deliveryId: '72d3162e-cc78-11e3-81ab-4c9367dc0958',
      input: {
        deliveryId: '72d3162e-cc78-11e3-81ab-4c9367dc0958',
        receivedAt: 1_700_000_000_000,
        event: 'push',
        action: null,
        installationId: 1,
        repository: { id: 186853002, fullName: 'Codertocat/Hello-World' },
        ref: 'refs/heads/master',
        headSha: HEAD,
        defaultBranch: 'master',
      },
    });
  });

  it('ignores a branch or tag deletion (after is all zeros)', () => {
    const deletion = githubExample('push', (p) => p.deleted === true && p.installation);
    expect(deletion.after).toMatch(/^0{40}$/);
    expect(classifyDelivery(delivery('push'), deletion)).toEqual({ accepted: false, reason: 'ref deleted' });
  });

  it('ignores a push missing the installation, repository, ref or head', () => {
    const noInstallation = githubExample('push', (p) => !p.installation && p.deleted === false);
    expect(classifyDelivery(delivery('push'), noInstallation)).toEqual({ accepted: false, reason: 'missing installation id' });

    const noRepoId = branchPush();
    delete noRepoId.repository.id;
    expect(classifyDelivery(delivery('push'), noRepoId)).toEqual({ accepted: false, reason: 'missing repository' });
    const noFullName = branchPush();
    delete noFullName.repository.full_name;
    expect(classifyDelivery(delivery('push'), noFullName)).toEqual({ accepted: false, reason: 'missing repository' });

    const noRef = branchPush();
    delete noRef.ref;
    expect(classifyDelivery(delivery('push'), noRef)).toEqual({ accepted: false, reason: 'missing ref' });

    const noAfter = branchPush();
    delete noAfter.after;
    expect(classifyDelivery(delivery('push'), noAfter)).toEqual({ accepted: false, reason: 'missing head sha' });
    const badAfter = branchPush();
    badAfter.after = 'not-a-sha';
    expect(classifyDelivery(delivery('push'), badAfter)).toEqual({ accepted: false, reason: 'missing head sha' });
  });

  it('ignores ping and irrelevant events', () => {
    expect(classifyDelivery(delivery('ping'), githubExample('ping'))).toEqual({ accepted: false, reason: 'ping' });
    expect(
      classifyDelivery(
        delivery('issues'),
        githubExample('issues', (p) => p.action === 'opened'),
      ),
    ).toEqual({
      accepted: false,
      reason: 'event ignored',
    });
    expect(
      classifyDelivery(
        delivery('installation'),
        githubExample('installation', (p) => p.action === 'created'),
      ),
    ).toEqual({
      accepted: false,
      reason: 'action ignored',
    });
    expect(
      classifyDelivery(
        delivery('repository'),
        githubExample('repository', (p) => p.action === 'edited'),
      ),
    ).toEqual({
      accepted: false,
      reason: 'action ignored',
    });
  });

  it.each(['deleted', 'suspend', 'unsuspend'])('accepts installation.%s', (action) => {
    const result = classifyDelivery(
      delivery('installation'),
      githubExample('installation', (p) => p.action === action),
    );
    expect(result).toMatchObject({ accepted: true, event: 'installation', input: { action, installationId: expect.any(Number) } });
  });

  it('accepts installation_repositories removed and added with their repositories', () => {
    const removed = classifyDelivery(
      delivery('installation_repositories'),
      githubExample('installation_repositories', (p) => p.action === 'removed'),
    );
    expect(removed).toMatchObject({
      accepted: true,
      input: { action: 'removed', installationId: 2, repositories: [{ id: 1296269, fullName: 'octocat/Hello-World' }] },
    });
    const added = classifyDelivery(
      delivery('installation_repositories'),
      githubExample('installation_repositories', (p) => p.action === 'added'),
    );
    expect(added).toMatchObject({
      accepted: true,
      input: { action: 'added', installationId: 957387, repositories: [{ id: 186853007, fullName: 'Codertocat/Space' }] },
    });
  });

  it('accepts repository.renamed with the previous name', () => {
    const result = classifyDelivery(
      delivery('repository'),
      githubExample('repository', (p) => p.action === 'renamed'),
    );
    expect(result).toMatchObject({
      accepted: true,
      input: {
        event: 'repository',
        action: 'renamed',
        installationId: 1,
        repository: { id: 186853261, fullName: 'Octocoders/Hello-World' },
        previousFullNames: [],
      },
    });
    // The example keeps the name and changes nothing visible; a real rename names the old one.
    const renamed = githubExample('repository', (p) => p.action === 'renamed');
    renamed.changes.repository.name.from = 'Old-Name';
    expect(classifyDelivery(delivery('repository'), renamed)).toMatchObject({ input: { previousFullNames: ['Octocoders/Old-Name'] } });
  });

  it('accepts repository.transferred with the previous owner', () => {
    const transferred = githubExample('repository', (p) => p.action === 'transferred' && p.installation);
    const result = classifyDelivery(delivery('repository'), transferred);
    expect(result).toMatchObject({ accepted: true, input: { action: 'transferred', repository: { id: transferred.repository.id } } });
  });

  it('a repository event without installation (a repository hook) is still accepted', () => {
    const renamed = githubExample('repository', (p) => p.action === 'renamed');
    delete renamed.installation;
    expect(classifyDelivery(delivery('repository'), renamed)).toMatchObject({ accepted: true, input: { installationId: null } });
  });

  it('puts no payload in the workflow input beyond what the effects need', () => {
    const result = classifyDelivery(delivery('push'), branchPush());
    expect(result.accepted && JSON.stringify(result.input).length).toBeLessThan(400);
  });
});

describe('parseWebhookBody', () => {
  it('parses JSON objects and the form payload field', () => {
    expect(parseWebhookBody(Buffer.from('{"a":1}'), 'application/json')).toEqual({ ok: true, payload: { a: 1 } });
    const form = `payload=${encodeURIComponent('{"zen":"x y & z"}')}`;
    expect(parseWebhookBody(Buffer.from(form), 'application/x-www-form-urlencoded')).toEqual({ ok: true, payload: { zen: 'x y & z' } });
  });

  it('refuses anything else with a message', () => {
    expect(parseWebhookBody(Buffer.from('{nope'), 'application/json')).toMatchObject({ ok: false, message: 'Body is not valid JSON.' });
    expect(parseWebhookBody(Buffer.from('[1]'), 'application/json')).toMatchObject({ ok: false, message: 'Body must be a JSON object.' });
    expect(parseWebhookBody(Buffer.from(''), 'application/json')).toMatchObject({ ok: false });
    expect(parseWebhookBody(Buffer.from('other=1'), 'application/x-www-form-urlencoded')).toMatchObject({ ok: false, path: ['payload'] });
  });
});

describe('deliverySearchValues', () => {
  it('names the event, the delivery and the repository when there is one', () => {
    const push = classifyDelivery(delivery('push'), branchPush());
    if (!push.accepted) throw new Error('expected accepted');
    expect(deliverySearchValues(push.input)).toEqual({
      GithubEvent: 'push',
      GithubDeliveryId: '72d3162e-cc78-11e3-81ab-4c9367dc0958',
      GithubRepository: 'Codertocat/Hello-World',
    });
    const installation = classifyDelivery(
      delivery('installation'),
      githubExample('installation', (p) => p.action === 'deleted'),
    );
    if (!installation.accepted) throw new Error('expected accepted');
    expect(deliverySearchValues(installation.input)).toEqual({ GithubEvent: 'installation', GithubDeliveryId: installation.deliveryId });
  });
});
