#!/usr/bin/env node
// The `den` operator CLI. It runs the TypeScript sources through tsx so that `npx den`
// works straight from a clone, with no build step.
require('tsx/cjs');
require('../src/cli/den.ts');
