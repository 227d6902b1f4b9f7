/** Every command of `den`: the features' operator commands, the runtime, the Slack link and the secrets. */
import type { Command } from 'commander';
import { emptyProgram } from './empty-program';
import { cliContext } from './context';
import { featureSettings } from '../main/config';
import { FEATURES } from '../main/features';
import { registerRuntimeCommands } from './runtime';
import { registerSecretsCommands } from './secrets';
import { registerSlackLinkCommand } from './slack-link';

export function buildProgram(): Command {
  const program = emptyProgram();
  for (const feature of FEATURES) feature.cli?.(program, { ...cliContext, settings: () => featureSettings(feature) });
  registerRuntimeCommands(program);
  // A client of the API beside the Slack feature's operator commands, under the same `den slack`.
  registerSlackLinkCommand(program);
  registerSecretsCommands(program, { ...cliContext, settings: () => undefined });
  return program;
}
