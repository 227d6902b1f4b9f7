/**
 * `npm run test:cluster`: tests against the production topology (issue #16), started by the
 * test itself with the project's own `npm run cluster` entry point as a child process. One file,
 * in order: its last tests kill processes of the cluster.
 */
const base = require('./jest.config');

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: base.testEnvironment,
  transform: base.transform,
  testMatch: ['<rootDir>/test/cluster/**/*.test.ts'],
  testTimeout: 120_000,
  maxWorkers: 1,
};
