import { defineConfig } from "@playwright/test";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { ADMIN_EMAIL, ADMIN_PASSWORD } from "./tests/fixtures/admin";
import { freshDatabaseUrl } from "./tests/fixtures/db";
import { MCP_TOKEN, OWNER_INBOX, ports } from "./tests/fixtures/ports";

// The suite runs against the debug build that `scripts/test` made, started here as a
// web server with its own database in the test cluster. `scripts/test` sets:
//   STANDMEET_BIN                 the server binary
//   STANDMEET_E2E_DATABASE_URL    a database for this run (created by the server)
//   STANDMEET_E2E_PORT            optional, default 3901 (see tests/fixtures/ports.ts)
// A second server runs with STANDMEET_MAIL=none for the specs about that case, a third
// on a database nobody else touches (what a newcomer sees first: fresh_database.spec.ts),
// and a real SMTP server on loopback (tests/fixtures/smtp_server.ts) takes the mail.
const projectRoot = path.resolve(__dirname, "..");
const baseURL = `http://127.0.0.1:${ports.app}`;
const baseURLWithoutMail = `http://127.0.0.1:${ports.appWithoutMail}`;
const baseURLOfFreshDatabase = `http://127.0.0.1:${ports.appOnFreshDatabase}`;
const bin = process.env.STANDMEET_BIN;
const databaseUrl = process.env.STANDMEET_E2E_DATABASE_URL;
if (!bin || !databaseUrl) {
  throw new Error(
    "Run the browser tests through scripts/test: it builds StandMeet, starts a test " +
      "database and sets STANDMEET_BIN and STANDMEET_E2E_DATABASE_URL.",
  );
}

// The sample vault (vault-sample/), copied so that specs may change its notes: the main
// server rebuilds its corpus from the copy and watches it. The workers see the same
// copy (they inherit the variable).
if (!process.env.STANDMEET_E2E_VAULT) {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), "standmeet-e2e-vault-"));
  fs.cpSync(path.join(projectRoot, "vault-sample"), copy, { recursive: true });
  process.env.STANDMEET_E2E_VAULT = copy;
}
const vault = process.env.STANDMEET_E2E_VAULT as string;

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
  globalSetup: "./tests/fixtures/global_setup.ts",
  projects: [
    {
      name: "chromium",
      use: { browserName: "chromium" },
      testIgnore: [/no_mail\.spec\.ts/, /fresh_database\.spec\.ts/],
    },
    {
      name: "without-mail",
      use: { browserName: "chromium", baseURL: baseURLWithoutMail },
      testMatch: /no_mail\.spec\.ts/,
    },
    {
      name: "fresh-database",
      use: { browserName: "chromium", baseURL: baseURLOfFreshDatabase },
      testMatch: /fresh_database\.spec\.ts/,
    },
  ],
  webServer: [
    server(ports.app, databaseUrl, `smtp://127.0.0.1:${ports.smtp}`, {
      STANDMEET_VAULT: vault,
      STANDMEET_VAULT_WATCH: "true",
      // Traces go to a collector nobody runs (port 9, discard): every spec passes all
      // the same, and a job's page links its trace (traces.spec.ts).
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9",
      STANDMEET_TRACE_URL: "https://traces.example/trace/{trace_id}",
    }),
    server(ports.appWithoutMail, `${databaseUrl}_without_mail`, "none"),
    server(ports.appOnFreshDatabase, freshDatabaseUrl(), `smtp://127.0.0.1:${ports.smtp}`),
  ],
});

function server(port: number, database: string, mail: string, more: Record<string, string> = {}) {
  return {
    command: bin!,
    cwd: projectRoot,
    url: `http://127.0.0.1:${port}/healthz`,
    reuseExistingServer: false,
    timeout: 120_000,
    stdout: "pipe" as const,
    stderr: "pipe" as const,
    env: {
      DATABASE_URL: database,
      LEPTOS_SITE_ADDR: `127.0.0.1:${port}`,
      STANDMEET_PUBLIC_URL: `http://127.0.0.1:${port}`,
      LEPTOS_SITE_ROOT: process.env.LEPTOS_SITE_ROOT ?? path.join(projectRoot, "target", "site"),
      RUST_LOG: process.env.RUST_LOG ?? "info",
      STANDMEET_ADMIN_EMAIL: ADMIN_EMAIL,
      STANDMEET_ADMIN_PASSWORD: ADMIN_PASSWORD,
      STANDMEET_MAIL: mail,
      STANDMEET_OWNER_EMAIL: OWNER_INBOX,
      STANDMEET_MCP_TOKEN: MCP_TOKEN,
      // A failed mail comes back after about two seconds, long enough to see `failed`.
      STANDMEET_RETRY_BASE_MS: "2000",
      // "Fetch new" waits 3 s here, so a board made slow by a spec gives a receipt.
      STANDMEET_FETCH_WAIT_MS: "3000",
      // Every spec signs in; the suite would otherwise meet the limit of 10 a minute.
      STANDMEET_LOGIN_ATTEMPTS_PER_MINUTE: "600",
      // The job boards and the webhook receiver of the specs are on loopback.
      STANDMEET_FETCH_ALLOW_PRIVATE: "true",
      ...more,
    },
  };
}
