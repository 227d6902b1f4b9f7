import type { Command } from 'commander';

// Filled in by the feature.
export function registerSlackCommands(_program: Command): void {}
