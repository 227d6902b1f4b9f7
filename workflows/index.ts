/** The workflow bundle entry: every workflow type the worker runs. Deterministic code only. */
export * from './ping';
export * from './automation-run';
export * from './slack-event';
export * from './github-delivery';
export * from './mcp-resolve';
