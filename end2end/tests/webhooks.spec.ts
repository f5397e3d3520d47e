// Webhooks in the browser (docs/events-and-webhooks.md): an endpoint is added and its secret shown
// once; "Send test" is queued, followed, and delivered, signed so that the receiver
// here verifies it with its own HMAC; a receiver that fails first shows `failed`, then
// `delivered` after "Redeliver".
import { expect, test } from "@playwright/test";
import * as crypto from "node:crypto";
import * as http from "node:http";
import { requestAccessAsVisitor } from "./fixtures/access_pages";
import { signInAsAdmin } from "./fixtures/admin";
import { sql } from "./fixtures/db";
import { ports } from "./fixtures/ports";

type Received = { path: string; headers: http.IncomingHttpHeaders; body: string };
/** Answers for the next requests: a status after a delay. Then 200 at once. */
const script: { status: number; delayMs: number }[] = [];
const received: Received[] = [];
let receiver: http.Server;

const hookUrl = (path: string) => `http://127.0.0.1:${ports.webhooks}${path}`;

test.beforeAll(async () => {
  receiver = http.createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      received.push({ path: request.url ?? "", headers: request.headers, body });
      const next = script.shift() ?? { status: 200, delayMs: 0 };
      setTimeout(() => {
        response.writeHead(next.status, { "content-type": "text/plain" });
        response.end(`receiver answered ${next.status}`);
      }, next.delayMs);
    });
  });
  await new Promise<void>((resolve) => receiver.listen(ports.webhooks, "127.0.0.1", resolve));
});

test.afterAll(async () => {
  await new Promise((resolve) => receiver.close(resolve));
});

test.beforeEach(async () => {
  script.length = 0;
  received.length = 0;
  await sql("DELETE FROM webhook_endpoints");
});

/** Whether `request` carries a Standard Webhooks signature made with `secret`. */
function signedWith(request: Received, secret: string): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const signed = `${request.headers["webhook-id"]}.${request.headers["webhook-timestamp"]}.${request.body}`;
  const expected = "v1," + crypto.createHmac("sha256", key).update(signed).digest("base64");
  return String(request.headers["webhook-signature"]).split(" ").includes(expected);
}

test("an endpoint shows its secret once, and Send test goes sending → delivered", async ({ page }) => {
  await signInAsAdmin(page, "/admin/webhooks");
  await page.getByLabel("URL").fill(hookUrl("/hook"));
  await page.getByRole("button", { name: "Add endpoint" }).click();
  const shown = page.getByTestId("webhook-secret");
  await expect(shown).toHaveText(/^whsec_[A-Za-z0-9+/]{43}=$/);
  const secret = (await shown.textContent())!.trim();
  const row = page.getByTestId("webhook-row").filter({ hasText: hookUrl("/hook") });
  await expect(row).toHaveCount(1);
  await expect(row.getByTestId("webhook-types")).toHaveText("*");

  // Shown once: not after a reload, not anywhere in the page.
  await page.reload();
  await expect(row).toHaveCount(1);
  await expect(page.getByTestId("webhook-secret")).toHaveCount(0);
  expect(await page.content()).not.toContain(secret);

  // The receiver takes its time, so the chip is seen on its way.
  script.push({ status: 200, delayMs: 2_000 });
  await row.getByTestId("webhook-url").click();
  await expect(page.getByTestId("webhook-detail")).toBeVisible();
  await page.getByRole("button", { name: "Send test" }).click();
  await expect(page.getByRole("status")).toContainText("queued");
  const delivery = page.getByTestId("delivery-row");
  await expect(delivery).toHaveCount(1);
  await expect(delivery.getByTestId("delivery-state")).toHaveText("sending");
  await expect(delivery.getByTestId("delivery-state")).toHaveText("delivered");
  await expect(page.getByRole("status")).toContainText("Test message delivered: HTTP 200");
  await expect(delivery.getByTestId("delivery-status")).toContainText("200");

  expect(received).toHaveLength(1);
  expect(JSON.parse(received[0].body).type).toBe("webhook.test");
  expect(signedWith(received[0], secret)).toBe(true);
});

test("a receiver that fails first: failed, then delivered after Redeliver", async ({ page }) => {
  const id = await createByForm(page, "/flaky");
  script.push({ status: 500, delayMs: 0 });
  await page.goto(`/admin/webhooks/${id}`);
  await page.getByRole("button", { name: "Send test" }).click();
  const delivery = page.getByTestId("delivery-row");
  await expect(delivery.getByTestId("delivery-state")).toHaveText("failed");
  await expect(page.getByRole("status")).toContainText("Test message failed");
  await expect(delivery.getByTestId("delivery-status")).toContainText("500");
  await expect(delivery.getByTestId("delivery-error")).toContainText("answered 500");

  await delivery.getByRole("button", { name: "Redeliver" }).click();
  await expect(page.getByRole("status")).toContainText("Redelivery queued");
  await expect(delivery.getByTestId("delivery-state")).toHaveText("delivered");
  await expect(delivery.getByTestId("delivery-attempts")).toHaveText("2");
  expect(received).toHaveLength(2);
  expect(received[1].headers["webhook-id"]).toBe(received[0].headers["webhook-id"]);
});

test("an event goes to the endpoint and shows on the events page", async ({ browser, page }) => {
  const id = await createByForm(page, "/events", ["access_request.created"]);
  await requestAccessAsVisitor(browser, "Grace", "grace@example.com");

  await page.goto(`/admin/webhooks/${id}`);
  const delivery = page.getByTestId("delivery-row").filter({ hasText: "access_request.created" });
  await expect(delivery.getByTestId("delivery-state")).toHaveText("delivered");
  const event = JSON.parse(received.at(-1)!.body);
  expect(event.data.email).toBe("grace@example.com");

  await page.goto("/admin/events?type=access_request.created");
  const row = page.locator(`[data-testid="event-row"][data-event-id="${event.id.replace("evt_", "")}"]`);
  await expect(row).toBeVisible();
  await expect(row.getByTestId("event-type")).toHaveText("access_request.created");
  await page.goto("/admin/events?type=owner.email_changed");
  await expect(page.locator(`[data-testid="event-row"][data-event-id="${event.id.replace("evt_", "")}"]`)).toHaveCount(0);
});

test("an endpoint is disabled, enabled and deleted; a bad URL is refused with words", async ({ page }) => {
  const id = await createByForm(page, "/switch");
  const row = page.locator(`[data-testid="webhook-row"][data-webhook-id="${id}"]`);
  await row.getByRole("button", { name: "Disable" }).click();
  await expect(row.getByTestId("webhook-state")).toHaveText("disabled");
  await row.getByRole("button", { name: "Enable" }).click();
  await expect(row.getByTestId("webhook-state")).toHaveText("enabled");
  await row.getByRole("button", { name: "Delete" }).click();
  await expect(page.getByRole("dialog")).toContainText("Delete the endpoint");
  await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
  await expect(row).toHaveCount(0);
  await expect(page.getByRole("status")).toContainText("deleted");

  await page.getByLabel("URL").fill("ftp://example.com/hook");
  await page.getByRole("button", { name: "Add endpoint" }).click();
  await expect(page.getByRole("status")).toContainText("http:// or https://");
  await expect(page.getByTestId("webhook-row")).toHaveCount(0);
});

/** Adds an endpoint for `path` through the form; answers its id. */
async function createByForm(page: import("@playwright/test").Page, path: string, types: string[] = []): Promise<number> {
  await signInAsAdmin(page, "/admin/webhooks");
  await page.getByLabel("URL").fill(hookUrl(path));
  for (const type of types) {
    await page.getByLabel(type, { exact: true }).check();
  }
  await page.getByRole("button", { name: "Add endpoint" }).click();
  await expect(page.getByTestId("webhook-secret")).toBeVisible();
  const rows = await sql<{ id: string }>("SELECT id FROM webhook_endpoints WHERE url = $1", [hookUrl(path)]);
  return Number(rows[0].id);
}
