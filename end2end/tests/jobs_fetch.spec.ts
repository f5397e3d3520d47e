import { expect, test } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { boardUrl, failingBoard, garbageBoard, resetBoards, slowBoard } from "./fixtures/boards";
import { ListingsPage, insertSource, resetListings } from "./fixtures/listings_page";

test.beforeEach(async () => {
  await resetBoards();
  await resetListings();
  await insertSource("Acme", "greenhouse", boardUrl("/greenhouse/acme"));
  await insertSource("Globex", "lever", boardUrl("/lever/globex"));
  await insertSource("Rust Jobs Weekly", "rss", boardUrl("/feeds/rust.rss"));
  await insertSource("Hooli", "rss", boardUrl("/feeds/hooli.atom"));
});

test("happy path: every board is fetched in one go and its listings show", async ({ page }) => {
  await signInAsAdmin(page, "/admin/listings");
  const listings = new ListingsPage(page);
  await listings.goto();
  await listings.fetchButton.click();
  await expect(listings.toasts).toContainText("8 new listings from 4 boards");
  for (const name of ["Acme", "Globex", "Rust Jobs Weekly", "Hooli"]) {
    await expect(listings.sourceChip(name)).toHaveText("fetched");
  }
  await expect(listings.rows).toHaveCount(8);
  const data = listings.listing("Data Engineer");
  await expect(data).toContainText("Globex");
  await expect(data).toContainText("New York, NY");
  await expect(data.getByRole("link", { name: "Data Engineer" })).toHaveAttribute(
    "href",
    "https://jobs.lever.co/globex/5b1c7a3e-8f4d-4c2a-9e61-0d2b7f3a9c11",
  );
});

test("a slow board: the toast says queued, its chip goes fetching → fetched, and its listings arrive", async ({ page }) => {
  await slowBoard("/lever/globex", 6_000);
  await signInAsAdmin(page, "/admin/listings");
  const listings = new ListingsPage(page);
  await listings.goto();
  await listings.fetchButton.click();
  await expect(listings.sourceChip("Globex")).toHaveText("fetching");
  await expect(listings.sourceChip("Acme")).toHaveText("fetched");
  // "Fetch new" waits 3 s here (playwright.config.ts), the board answers after 6 s.
  await expect(listings.toasts).toContainText("queued");
  await expect(listings.rows).toHaveCount(6);
  await expect(listings.sourceChip("Globex")).toHaveText("fetched", { timeout: 15_000 });
  await expect(listings.rows).toHaveCount(8);
  await expect(listings.listing("Frontend Engineer")).toBeVisible();
});

test("a broken board shows its error and the other boards' listings still arrive", async ({ page }) => {
  await failingBoard("/lever/globex", 404);
  await garbageBoard("/feeds/hooli.atom");
  await signInAsAdmin(page, "/admin/listings");
  const listings = new ListingsPage(page);
  await listings.goto();
  await listings.fetchButton.click();
  await expect(listings.toasts).toContainText("Globex could not be fetched: the board answered 404 Not Found");
  await expect(listings.toasts).toContainText("Hooli could not be fetched: the answer is not an RSS or Atom feed");
  await expect(listings.sourceChip("Globex")).toHaveText("failed");
  await expect(listings.source("Globex").getByTestId("source-error")).toContainText("404 Not Found; check the source's URL");
  await expect(listings.sourceChip("Hooli")).toHaveText("failed");
  await expect(listings.sourceChip("Acme")).toHaveText("fetched");
  await expect(listings.sourceChip("Rust Jobs Weekly")).toHaveText("fetched");
  await expect(listings.rows).toHaveCount(4);
});
