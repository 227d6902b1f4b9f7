#!/usr/bin/env node
// The `den` operator CLI. In a development install (tsx present) it runs the TypeScript
// sources, so `npx den` works straight from a clone and never runs a stale build; in a
// production install (the Docker image: no dev dependencies) it runs the compiled dist/.
const path = require('node:path');

let tsx;
try {
  tsx = require.resolve('tsx/cjs');
} catch {
  tsx = undefined;
}
if (tsx) {
  require(tsx);
  require(path.join(__dirname, '..', 'src', 'cli', 'den.ts'));
} else {
  require(path.join(__dirname, '..', 'dist', 'src', 'cli', 'den.js'));
}
