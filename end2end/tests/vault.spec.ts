// The corpus from the sample vault (docs/corpus.md): "Rebuild from vault" on
// /admin/corpus → a toast, the chip, then the counts with the broken note listed; a
// note's entry page with its rendered Markdown, inert markup and links to the notes it
// names; and a note written into the (watched) vault reaching search on its own, with
// the post-build hook delivered.
import * as fs from "node:fs";
import * as http from "node:http";
import * as path from "node:path";
import { expect, test } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { sql } from "./fixtures/db";

const vault = process.env.STANDMEET_E2E_VAULT as string;

test("rebuild from the vault: chip, counts, the broken note listed, and a note's page with its links", async ({ page }) => {
  await signInAsAdmin(page, "/admin/corpus");
  const panel = page.getByTestId("vault");
  await panel.getByRole("button", { name: "Rebuild from vault" }).click();
  await expect(page.getByRole("status")).toContainText("Rebuild queued");
  await expect(panel.getByTestId("vault-rebuild-state")).toHaveText("completed", { timeout: 20_000 });
  const count = (word: string) => panel.locator(`[data-testid="vault-count"][data-count-of="${word}"]`);
  // The first rebuild of this run adds every note but the broken one (a later one in
  // the same run finds them unchanged).
  const added = Number(await count("added").getAttribute("data-count"));
  const unchanged = Number(await count("unchanged").getAttribute("data-count"));
  expect(added + unchanged).toBeGreaterThanOrEqual(30);
  await expect(count("failed")).toHaveAttribute("data-count", "1");
  await panel.getByText("1 note was not imported").click();
  await expect(panel.getByTestId("vault-failed-note")).toContainText("Broken front matter.md");

  // The lighthouse's page as a visitor reads it: Markdown rendered, its [[Harbour]] a
  // link to the harbour's page.
  const ids = await sql<{ path: string; entry_id: string }>(
    "SELECT path, entry_id FROM corpus_vault_notes WHERE path IN ('Places/Lighthouse.md', 'Places/Harbour.md', 'Unsafe example.md')",
  );
  const id = (p: string) => ids.find((row) => row.path === p)!.entry_id;

  // The note is the source: its entry offers no edit, and says where to change it.
  const row = page.locator(`[data-testid="corpus-row"][data-entry-id="${id("Places/Lighthouse.md")}"]`);
  await expect(row.getByTestId("entry-note")).toHaveText("from the vault: Places/Lighthouse.md");
  await expect(row.getByRole("link", { name: "Edit" })).toHaveCount(0);
  await expect(row.getByRole("button", { name: "Promote" })).toHaveCount(0);
  await page.goto(`/admin/corpus/${id("Places/Lighthouse.md")}`);
  await expect(page.getByTestId("entry-note")).toContainText("Made from the note Places/Lighthouse.md in the vault");
  await expect(page.getByRole("button", { name: "Save" })).toHaveCount(0);
  await expect(page.getByTestId("entry-preview").locator("strong")).toHaveText("lighthouse");

  await page.goto(`/entries/${id("Places/Lighthouse.md")}`);
  const body = page.getByTestId("entry-body");
  await expect(body.locator("strong")).toHaveText("lighthouse");
  await body.getByRole("link", { name: "Harbour" }).click();
  await expect(page).toHaveURL(new RegExp(`/entries/${id("Places/Harbour.md")}$`));
  await expect(page.getByTestId("entry-title")).toHaveText("The harbour");

  // Markup that would run is inert: no dialog opens, no script is in the body.
  let dialogs = 0;
  page.on("dialog", async (dialog) => {
    dialogs += 1;
    await dialog.dismiss();
  });
  await page.goto(`/entries/${id("Unsafe example.md")}`);
  await expect(page.getByTestId("entry-body")).toContainText("StandMeet shows it as plain, harmless text");
  expect(await page.getByTestId("entry-body").locator("script, [onerror]").count()).toBe(0);
  expect(await page.getByTestId("entry-body").locator('a[href^="javascript"]').count()).toBe(0);
  expect(dialogs).toBe(0);
});

test("a note written into the watched vault is searchable on its own, and the post-build hook is delivered", async ({ page }) => {
  // A post-build hook: an endpoint subscribed to corpus.rebuilt, on loopback.
  const received: string[] = [];
  const receiver = http.createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      received.push(body);
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const port = (receiver.address() as { port: number }).port;
  try {
    await signInAsAdmin(page, "/admin/webhooks");
    await page.getByLabel("URL").fill(`http://127.0.0.1:${port}/deploy`);
    await page.getByLabel("All event types (*)").uncheck();
    await page.getByLabel("corpus.rebuilt", { exact: true }).check();
    await page.getByRole("button", { name: "Add endpoint" }).click();
    await expect(page.getByTestId("webhook-secret")).toBeVisible();

    const word = `seagull${Date.now()}`;
    fs.writeFileSync(path.join(vault, "Seagulls.md"), `---\npublish: true\n---\n# Seagulls\n\nThe ${word} steals chips.\n`);
    // Within a few seconds the watcher's rebuild has it indexed: a visitor finds it.
    await expect
      .poll(async () => {
        await page.goto(`/search?q=${word}`);
        return page.getByTestId("search-result").count();
      }, { timeout: 20_000 })
      .toBe(1);
    await expect.poll(() => received.some((body) => body.includes('"corpus.rebuilt"')), { timeout: 20_000 }).toBe(true);
    await page.goto("/admin/corpus");
    const hook = page.getByTestId("vault").getByTestId("vault-hook");
    await expect(hook).toContainText(`http://127.0.0.1:${port}/deploy`);
    await expect(hook.getByTestId("hook-state")).toHaveText("delivered");
  } finally {
    fs.rmSync(path.join(vault, "Seagulls.md"), { force: true });
    await sql("DELETE FROM webhook_endpoints WHERE url LIKE $1", [`http://127.0.0.1:${port}/%`]);
    receiver.close();
  }
});

test("a vault mostly gone removes nothing until the admin confirms, and comes back whole", async ({ page }) => {
  // A sync that brought back a third of the folders: 19 of the notes are gone.
  const gone = ["Places", "Recipes", "Reading"];
  const aside = fs.mkdtempSync(path.join(path.dirname(vault), "standmeet-e2e-aside-"));
  const vaultEntries = async () =>
    Number((await sql<{ n: string }>("SELECT count(*) AS n FROM corpus_vault_notes"))[0].n);
  await signInAsAdmin(page, "/admin/corpus");
  const panel = page.getByTestId("vault");
  await panel.getByRole("button", { name: "Rebuild from vault" }).click();
  await expect(panel.getByTestId("vault-rebuild-state")).toHaveText("completed", { timeout: 20_000 });
  const before = await vaultEntries();
  const lastRebuild = async () =>
    Number((await sql<{ id: string }>("SELECT coalesce(max(id), 0) AS id FROM jobs WHERE kind = 'corpus.vault_rebuild'"))[0].id);
  const rebuildsBefore = await lastRebuild();
  try {
    for (const folder of gone) fs.renameSync(path.join(vault, folder), path.join(aside, folder));
    // The watcher sees the folders go and rebuilds on its own (removing nothing): wait for
    // that rebuild to end, so that it does not come after the admin's and show its counts.
    await expect
      .poll(
        async () =>
          Number(
            (
              await sql<{ n: string }>(
                `SELECT count(*) FILTER (WHERE state = 'completed') - count(*) FILTER (WHERE state <> 'completed') AS n
                   FROM jobs WHERE kind = 'corpus.vault_rebuild' AND id > $1`,
                [rebuildsBefore],
              )
            )[0].n,
          ),
        { timeout: 20_000 },
      )
      .toBeGreaterThan(0);
    await page.reload();
    await panel.getByRole("button", { name: "Rebuild from vault" }).click();
    const warning = panel.getByTestId("vault-would-remove");
    await expect(warning).toHaveAttribute("data-count", "19", { timeout: 20_000 });
    await expect(warning).toContainText("19 entries' notes are gone");
    expect(await vaultEntries()).toBe(before);

    // The admin says the notes were deleted on purpose.
    await warning.getByRole("button", { name: "Remove 19 entries" }).click();
    await expect(panel.locator('[data-testid="vault-count"][data-count-of="removed"]')).toHaveAttribute(
      "data-count",
      "19",
      { timeout: 20_000 },
    );
    await expect(panel.getByTestId("vault-would-remove")).toHaveCount(0);
    expect(await vaultEntries()).toBe(before - 19);
  } finally {
    for (const folder of gone) {
      if (fs.existsSync(path.join(aside, folder))) fs.renameSync(path.join(aside, folder), path.join(vault, folder));
    }
    fs.rmSync(aside, { recursive: true, force: true });
  }
  // The notes back: the next rebuild adds them again.
  await page.reload();
  await panel.getByRole("button", { name: "Rebuild from vault" }).click();
  await expect.poll(vaultEntries, { timeout: 20_000 }).toBe(before);
});
