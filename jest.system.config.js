/**
 * `npm run test:system`: the suites that bring up a whole stack of their own and take minutes,
 * one at a time after the service suite — the OpenAPI document under schemathesis
 * (test/conformance/) and the production topology (test/cluster/: the test starts
 * `npm run cluster`'s entry point as a child process; its last tests kill processes).
 */
const base = require('./jest.config');

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: base.testEnvironment,
  transform: base.transform,
  transformIgnorePatterns: base.transformIgnorePatterns,
  testMatch: ['<rootDir>/test/conformance/**/*.test.ts', '<rootDir>/test/cluster/**/*.test.ts'],
  testTimeout: 120_000,
  maxWorkers: 1,
};
