// Visitors (docs/reference/pages.md#visitor-pages): their own navigation, and search results that open
// `/entries/<id>` under the same rules as the search (a restricted entry is "Page not
// found" until the visitor redeems an access code).
import { expect, test } from "@playwright/test";
import { redeemCode, visitorContext } from "./fixtures/access_pages";
import { SearchPage, promotedEntry, resetCorpus } from "./fixtures/corpus_page";

test.beforeEach(async () => {
  await resetCorpus();
});

test("a visitor finds an entry and opens it; a restricted one is not found until access", async ({ browser }) => {
  const open = await promotedEntry("Lighthouse (public)", "The lamp turns every ten seconds.\nVisits on Sundays.", "public");
  const closed = await promotedEntry("Lighthouse (restricted)", "The keeper's logbook from 1911.", "restricted");
  const visitor = await visitorContext(browser);
  const page = await visitor.newPage();

  // The visitor's navigation, and no admin links.
  await page.goto("/");
  const visitorNav = page.getByRole("navigation", { name: "Visitor" });
  for (const name of ["Search", "Request access", "Enter a code"]) {
    await expect(visitorNav.getByRole("link", { name })).toBeVisible();
  }
  await expect(page.getByRole("navigation", { name: "Admin" })).toHaveCount(0);
  await visitorNav.getByRole("link", { name: "Search" }).click();
  await expect(page).toHaveURL(/\/search/);

  const search = new SearchPage(page);
  await search.search("lamp");
  await search.results.first().getByTestId("search-result-link").click();
  await expect(page).toHaveURL(new RegExp(`/entries/${open}$`));
  await expect(page.getByTestId("entry-title")).toHaveText("Lighthouse (public)");
  await expect(page.getByTestId("entry-body")).toContainText("Visits on Sundays.");

  const hidden = await page.goto(`/entries/${closed}`);
  expect(hidden?.status()).toBe(404);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Page not found");
  expect((await page.goto("/entries/999999999"))?.status()).toBe(404);

  const email = "entries.visitor@example.com";
  const code = "Q4RT-8WXN-2LPA";
  await redeemCode(page, email, code);
  const shown = await page.goto(`/entries/${closed}`);
  expect(shown?.status()).toBe(200);
  await expect(page.getByTestId("entry-title")).toContainText("Lighthouse (restricted)");
  await visitor.close();
});
