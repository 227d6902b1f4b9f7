/** The ingress gateway's id reuse policy (src/app/ingress.ts `startPolicy`), the one place every start takes it from. */
import fs from 'node:fs';
import path from 'node:path';
import { WorkflowIdReusePolicy } from '@temporalio/client';
import { startPolicy } from '../../src/app/ingress';

describe('startPolicy', () => {
  it('is REJECT_DUPLICATE, so a late hand-off never revives a finished workflow, but for an actor that asks to reopen', () => {
    expect(startPolicy({})).toBe(WorkflowIdReusePolicy.REJECT_DUPLICATE);
    expect(startPolicy({ reopen: false })).toBe(WorkflowIdReusePolicy.REJECT_DUPLICATE);
    expect(startPolicy({ reopen: true })).toBe(WorkflowIdReusePolicy.ALLOW_DUPLICATE);
  });

  it('is where every start of the gateway takes its policy from', () => {
    const source = fs.readFileSync(path.join(__dirname, '../../src/app/ingress.ts'), 'utf8');
    const policies = [...source.matchAll(/WorkflowIdReusePolicy\.\w+/g)].map((m) => m[0]);
    const inStartPolicy = /export function startPolicy[\s\S]*?\n\}/.exec(source)![0];
    expect(policies).toHaveLength([...inStartPolicy.matchAll(/WorkflowIdReusePolicy\.\w+/g)].length);
    expect(source.match(/workflowIdReusePolicy:/g)).toEqual(['workflowIdReusePolicy:']);
    expect(source).toContain('workflowIdReusePolicy: startPolicy(request)');
  });
});
