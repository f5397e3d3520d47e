import { expect, test } from "@playwright/test";
import { SearchPage, promotedEntry, resetCorpus } from "./fixtures/corpus_page";

test.beforeEach(async () => {
  await resetCorpus();
});

test("東京 finds 東京タワー, a query without matches says so, and a bad query says what is wrong", async ({ page }) => {
  await promotedEntry("東京タワー", "東京タワーは夜にきれいです。展望台から富士山も見えます。");
  await promotedEntry("Kyoto notes", "Temples and gardens.");
  const search = new SearchPage(page);

  await search.search("東京");
  await expect(search.results).toHaveCount(1);
  await expect(search.results.first()).toContainText("東京タワー");
  await expect(search.results.first().locator("mark").first()).toHaveText("東京");

  await search.search("富士山");
  await expect(search.results).toHaveCount(1);

  await search.search("京都");
  await expect(search.results).toHaveCount(0);
  await expect(search.empty).toContainText("No results for “京都”.");

  await search.search("!!!");
  await expect(search.empty).toContainText("No results for “!!!”.");

  const long = "東".repeat(300);
  await search.search(long);
  await expect(page.getByTestId("search-error")).toHaveText("A search is at most 200 characters; this one has 300.");

  await search.search("");
  await expect(page.getByRole("searchbox", { name: "Search" })).toBeVisible();
  await expect(search.results).toHaveCount(0);
  await expect(page.getByText("Search the owner's entries by word")).toBeVisible();
});

test("the search box works after hydration too", async ({ page }) => {
  await promotedEntry("東京タワー", "東京タワーは夜にきれいです。");
  const search = new SearchPage(page);
  await search.search("");
  await page.getByRole("searchbox", { name: "Search" }).fill("タワー");
  await page.getByRole("button", { name: "Search" }).click();
  await expect(page).toHaveURL(/\/search\?q=/);
  await expect(search.results).toHaveCount(1);
});
