import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          testTimeout: 30_000,
          // Each file ends by running the GC and failing on a file handle it had to close.
          setupFiles: ["test/support/noGcWarning.ts"]
        }
      },
      {
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          globalSetup: ["test/integration/globalSetup.ts"],
          testTimeout: 180_000,
          hookTimeout: 600_000,
          setupFiles: ["test/support/noGcWarning.ts"],
          // One Docker engine, one iptables: the integration files run one at a time.
          pool: "forks",
          poolOptions: { forks: { singleFork: true } }
        }
      },
      {
        test: {
          // Benchmarks (npm run bench), never part of npm test: they measure, they do not assert.
          name: "bench",
          include: ["bench/**/*.bench.ts"],
          testTimeout: 600_000,
          pool: "forks",
          poolOptions: { forks: { singleFork: true } }
        }
      }
    ]
  }
})
