/** The workflow bundle entry: every workflow type the worker runs. Deterministic code only. */
export * from './ping';
export * from './runs';
export * from './slack';
export * from './github';
export * from './mcp';
