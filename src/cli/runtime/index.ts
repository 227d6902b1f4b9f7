/** The reference runtime (`den runtime`): a client of the API that only the CLI imports. */
export { registerRuntimeCommands } from './command';
