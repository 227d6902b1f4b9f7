import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', '.data/**', '.tools/**', 'coverage/**', 'bench/results/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // The config module is the only reader of the environment.
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'Read configuration through src/app/config.ts.' }],
    },
  },
  {
    files: ['src/app/config.ts', 'test/setup/**', 'test/harness/process.ts', 'bench/**', 'scripts/**'],
    rules: { 'no-restricted-properties': 'off' },
  },
  {
    files: ['bin/**/*.js', 'jest.config.js'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Workflow code must be deterministic: no Node built-ins, no clocks or randomness of its own.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: ['node:*', 'fs', 'crypto', 'http', 'https', '../src/store/*', '../src/http/*'] }],
    },
  },
);
