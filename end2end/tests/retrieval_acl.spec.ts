import { expect, test } from "@playwright/test";
import { visitorContext } from "./fixtures/access_pages";
import { SearchPage, promotedEntry, repliedRequest, resetCorpus } from "./fixtures/corpus_page";
import { callTool } from "./fixtures/mcp";

test.beforeEach(async () => {
  await resetCorpus();
});

test("a restricted entry is invisible until the visitor redeems an access code", async ({ browser }) => {
  await promotedEntry("Orchard (public)", "Apple harvest starts in September.", "public");
  await promotedEntry("Orchard (restricted)", "Apple cider recipes for the family.", "restricted");
  const email = "acl.visitor@example.com";
  const code = "K7QF-2MZP-9HXA";
  await repliedRequest(email, code);

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

  await page.goto("/access");
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Access code").fill(code);
  await expect(page.getByRole("button", { name: "Enter" })).toBeEnabled();
  await page.getByRole("button", { name: "Enter" }).click();
  await expect(page.getByTestId("access-granted")).toContainText("Access granted");

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
