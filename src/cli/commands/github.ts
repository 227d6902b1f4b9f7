import type { Command } from 'commander';

// Filled in by the feature.
export function registerGithubCommands(_program: Command): void {}
