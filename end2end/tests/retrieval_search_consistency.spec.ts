import { expect, test } from "@playwright/test";
import { visitorContext } from "./fixtures/access_pages";
import { signInAsAdmin } from "./fixtures/admin";
import { CorpusPage, SearchPage, promotedEntry, resetCorpus } from "./fixtures/corpus_page";
import { callTool } from "./fixtures/mcp";

test.beforeEach(async () => {
  await resetCorpus();
});

test("an entry written and promoted in the admin page with receipts saying indexed is found by a search right after", async ({ page, browser }) => {
  await signInAsAdmin(page, "/admin/corpus");
  const corpus = new CorpusPage(page);
  await corpus.goto();
  await corpus.create("Harbour walks", "The ferry leaves the harbour at dawn; walkers follow the pier to the lighthouse.");
  await expect(corpus.toasts).toContainText("saved as a draft and indexed");
  await expect(page.getByLabel("Title")).toHaveValue("");
  await expect(page.getByLabel("Body")).toHaveValue("");
  await expect(corpus.indexState("Harbour walks")).toHaveText("indexed");
  await expect(corpus.row("Harbour walks").getByTestId("entry-status")).toHaveText("draft");

  const visitor = await visitorContext(browser);
  const search = new SearchPage(await visitor.newPage());
  await search.search("lighthouse");
  await expect(search.empty).toContainText("No results for “lighthouse”");

  await corpus.row("Harbour walks").getByRole("button", { name: "Promote" }).click();
  await expect(corpus.toasts).toContainText("promoted and indexed: searches find it now");
  await search.search("lighthouse");
  await expect(search.results).toHaveCount(1);
  await expect(search.results.first()).toContainText("Harbour walks");
  await expect(search.results.first().locator("mark")).toHaveText("lighthouse");
  await visitor.close();
});

test("through MCP: create, promote and update answer indexed:true, and each search right after sees the write", async () => {
  const id = await promotedEntry("Night market", "Stalls open after dark and sell grilled corn.");
  const first = await callTool("corpus.search", { q: "grilled corn" });
  expect(first.content.results.map((result: { id: number }) => result.id)).toEqual([id]);
  expect(first.content.results[0].snippet).toContain("**grilled**");

  for (let n = 1; n <= 5; n++) {
    const updated = await callTool("corpus.update", { id, body: `Stall number ${n} sells lanterns${n}.` });
    expect(updated.content.indexed).toBe(true);
    const found = await callTool("corpus.search", { q: `lanterns${n}` });
    expect(found.content.results.map((result: { id: number }) => result.id)).toEqual([id]);
  }
  const gone = await callTool("corpus.search", { q: "grilled" });
  expect(gone.content.results).toEqual([]);
});
