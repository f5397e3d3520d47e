import { defineConfig } from "@playwright/test";
import * as path from "node:path";
import { ADMIN_EMAIL, ADMIN_PASSWORD } from "./tests/fixtures/admin";

// The suite runs against the debug build that `scripts/test` made, started here as a
// web server with its own database in the test cluster. `scripts/test` sets:
//   STANDMEET_BIN                 the server binary
//   STANDMEET_E2E_DATABASE_URL    a database for this run (created by the server)
//   STANDMEET_E2E_PORT            optional, default 3901
const projectRoot = path.resolve(__dirname, "..");
const port = Number(process.env.STANDMEET_E2E_PORT ?? "3901");
const baseURL = `http://127.0.0.1:${port}`;
const bin = process.env.STANDMEET_BIN;
const databaseUrl = process.env.STANDMEET_E2E_DATABASE_URL;
if (!bin || !databaseUrl) {
  throw new Error(
    "Run the browser tests through scripts/test: it builds StandMeet, starts a test " +
      "database and sets STANDMEET_BIN and STANDMEET_E2E_DATABASE_URL.",
  );
}

export default defineConfig({
  testDir: "./tests",
  timeout: 30_000,
  expect: { timeout: 10_000 },
  fullyParallel: false,
  workers: 1,
  forbidOnly: true,
  retries: 0,
  reporter: [["list"]],
  use: {
    baseURL,
    trace: "retain-on-failure",
    launchOptions: {
      executablePath: "/usr/bin/chromium",
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
      ],
    },
  },
  projects: [{ name: "chromium", use: { browserName: "chromium" } }],
  webServer: {
    command: bin,
    cwd: projectRoot,
    url: `${baseURL}/healthz`,
    reuseExistingServer: false,
    timeout: 120_000,
    stdout: "pipe",
    stderr: "pipe",
    env: {
      DATABASE_URL: databaseUrl,
      LEPTOS_SITE_ADDR: `127.0.0.1:${port}`,
      LEPTOS_SITE_ROOT: process.env.LEPTOS_SITE_ROOT ?? path.join(projectRoot, "target", "site"),
      RUST_LOG: process.env.RUST_LOG ?? "info",
      STANDMEET_ADMIN_EMAIL: ADMIN_EMAIL,
      STANDMEET_ADMIN_PASSWORD: ADMIN_PASSWORD,
    },
  },
});
