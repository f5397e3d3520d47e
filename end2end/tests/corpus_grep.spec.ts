import { expect, test } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { CorpusPage, resetCorpus } from "./fixtures/corpus_page";

test.beforeEach(async () => {
  await resetCorpus();
});

test("the admin's grep finds substrings inside words, drafts included, and says when nothing contains it", async ({ page }) => {
  await signInAsAdmin(page, "/admin/corpus");
  const corpus = new CorpusPage(page);
  await corpus.goto();
  await corpus.create("Config notes", "Set STANDMEET_INDEX_WAIT_MS=2000 to wait for the index.");
  await expect(corpus.indexState("Config notes")).toHaveText("indexed");
  await corpus.create("Percentages", "100% of the 5_000 entries are drafts.");
  await expect(corpus.indexState("Percentages")).toHaveText("indexed");
  await corpus.create("Other", "Nothing to see.");
  await expect(corpus.indexState("Other")).toHaveText("indexed");
  await expect(corpus.rows).toHaveCount(3);

  await corpus.grep("dex_wa");
  await expect(page).toHaveURL(/grep=dex_wa/);
  await expect(corpus.rows).toHaveCount(1);
  await expect(corpus.row("Config notes")).toBeVisible();

  await corpus.grep("0%");
  await expect(corpus.rows).toHaveCount(1);
  await expect(corpus.row("Percentages")).toBeVisible();

  await corpus.grep("NOTES");
  await expect(corpus.rows).toHaveCount(1);

  await corpus.grep("nowhere");
  await expect(corpus.rows).toHaveCount(0);
  await expect(page.getByTestId("corpus-empty")).toHaveText("No entry contains “nowhere”.");
  await page.getByRole("link", { name: "Show all" }).click();
  await expect(corpus.rows).toHaveCount(3);
});

test("Edit opens the entry; Save answers its receipt and the new words are searchable at once", async ({ page }) => {
  await signInAsAdmin(page, "/admin/corpus");
  const corpus = new CorpusPage(page);
  await corpus.goto();
  await corpus.create("Tide tables", "Low tide at six.");
  await expect(corpus.indexState("Tide tables")).toHaveText("indexed");
  await corpus.row("Tide tables").getByRole("button", { name: "Promote" }).click();
  await expect(corpus.row("Tide tables").getByTestId("entry-status")).toHaveText("promoted");

  await corpus.row("Tide tables").getByRole("link", { name: "Edit" }).click();
  await expect(page.getByRole("heading", { level: 1 })).toHaveText(/^Entry \d+$/);
  await expect(page.getByLabel("Body")).toHaveValue("Low tide at six.");
  await page.getByLabel("Body").fill("Low tide at nine, with the spring moon.");
  await expect(page.getByRole("button", { name: "Save" })).toBeEnabled();
  await page.getByRole("button", { name: "Save" }).click();
  await expect(corpus.toasts).toContainText("saved and indexed");
  await expect(page.getByTestId("index-state")).toHaveText("indexed");

  const search = await page.context().newPage();
  await search.goto(`/search?q=${encodeURIComponent("spring moon")}`);
  await expect(search.getByTestId("search-result")).toHaveCount(1);
  await search.goto("/search?q=six");
  await expect(search.getByTestId("search-empty")).toBeVisible();
});
