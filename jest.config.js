/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  transform: {
    '^.+\\.(t|j)sx?$': [
      '@swc/jest',
      { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' } },
    ],
  },
  // One Temporal dev server, one Postgres and one workflow bundle for the whole run.
  globalSetup: '<rootDir>/test/setup/global-setup.ts',
  globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  // Those run against the production topology: npm run test:cluster (jest.cluster.config.js).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/cluster/'],
  testTimeout: 60_000,
  // Two cores: Temporal, Postgres and the workers share them.
  maxWorkers: 2,
};
