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
