import { expect, test } from "@playwright/test";
import { redeemCode, visitorContext } from "./fixtures/access_pages";
import { SearchPage, promotedEntry, resetCorpus } from "./fixtures/corpus_page";
import { callTool } from "./fixtures/mcp";

test.beforeEach(async () => {
  await resetCorpus();
});

test("a restricted entry is invisible until the visitor redeems an access code", async ({ browser }) => {
  await promotedEntry("Orchard (public)", "Apple harvest starts in September.", "public");
  await promotedEntry("Orchard (restricted)", "Apple cider recipes for the family.", "restricted");
  const email = "acl.visitor@example.com";
  const code = "K7QF-2MZP-9HXA";

  const visitor = await visitorContext(browser);
  const page = await visitor.newPage();
  const search = new SearchPage(page);
  await search.search("apple");
  await expect(search.results).toHaveCount(1);
  await expect(search.results.first()).toContainText("Orchard (public)");
  await search.search("cider");
  await expect(search.empty).toContainText("No results for “cider”");
  // Agents see what an anonymous visitor sees.
  expect((await callTool("corpus.search", { q: "cider" })).content.results).toEqual([]);

  await redeemCode(page, email, code);

  await search.search("apple");
  await expect(search.results).toHaveCount(2);
  await search.search("cider");
  await expect(search.results).toHaveCount(1);
  await expect(search.results.first()).toContainText("restricted");
  await visitor.close();

  // Another visitor still does not see it.
  const stranger = await visitorContext(browser);
  const strangerSearch = new SearchPage(await stranger.newPage());
  await strangerSearch.search("cider");
  await expect(strangerSearch.empty).toBeVisible();
  await stranger.close();
});
