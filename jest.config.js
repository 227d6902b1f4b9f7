/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  transform: {
    '^.+\\.(t|j)sx?$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  // Packages that ship only as ES modules, which Jest's own module system cannot require() (Node
  // can): the unified/remark Markdown parser (src/slack/mrkdwn.ts) with its packages, and the GitHub App client
  // (@octokit/*) with its helpers. @swc/jest turns them into CommonJS like the project's files.
  transformIgnorePatterns: [
    '/node_modules/(?!(unified|bail|ccount|character-entities|decode-named-character-reference|devlop|escape-string-regexp|is-plain-obj|longest-streak|markdown-table|trough|zwitch|vfile|vfile-message|mdast-util-[a-z-]+|micromark|micromark-[a-z-]+|remark-[a-z]+|unist-util-[a-z-]+|@octokit|universal-github-app-jwt|universal-user-agent|json-with-bigint|toad-cache|content-type)/)',
  ],
  // One Temporal dev server, one Postgres and one workflow bundle for the whole run.
  globalSetup: '<rootDir>/test/setup/global-setup.ts',
  globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  // Those bring up whole stacks of their own, one at a time: npm run test:system (jest.system.config.js).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/cluster/', '<rootDir>/test/conformance/'],
  testTimeout: 60_000,
  // Two cores: Temporal, Postgres and the workers share them.
  maxWorkers: 2,
};
