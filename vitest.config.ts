import { defineConfig } from "vitest/config";

// Tests are split by cost (STYLE.md 9); `npm test` runs every project.
const env = {
  POWERTOOLS_LOG_LEVEL: "SILENT",
  POWERTOOLS_METRICS_DISABLED: "true",
  POWERTOOLS_DEV: "false",
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
};

export default defineConfig({
  test: {
    projects: [
      { test: { name: "unit", include: ["test/unit/**/*.test.ts"], env } },
      { test: { name: "adapter", include: ["test/adapter/**/*.test.ts"], env, testTimeout: 30_000 } },
      { test: { name: "flow", include: ["test/flow/**/*.test.ts"], env, testTimeout: 60_000 } },
      { test: { name: "e2e", include: ["test/e2e/**/*.test.ts"], env, testTimeout: 120_000, hookTimeout: 120_000 } },
      { test: { name: "infra", include: ["test/infra/**/*.test.ts"], env, testTimeout: 300_000, hookTimeout: 300_000 } },
      { test: { name: "rehearsal", include: ["test/rehearsal/**/*.test.ts"], env, testTimeout: 300_000, hookTimeout: 400_000 } },
      // Real Modal/E2B: only with PROVIDERS_LIVE=1 (`npm run test:providers:live`); skipped otherwise.
      { test: { name: "live", include: ["test/live/**/*.test.ts"], env, testTimeout: 900_000 } },
    ],
  },
});
