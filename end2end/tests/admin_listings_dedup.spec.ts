import { expect, test } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { boardUrl, resetBoards } from "./fixtures/boards";
import { ListingsPage, resetListings } from "./fixtures/listings_page";

test.beforeEach(async () => {
  await resetBoards();
  await resetListings();
});

test("a listing on two boards shows once; the first fetch marks everything new, the next nothing", async ({ page }) => {
  await signInAsAdmin(page, "/admin/listings");
  const listings = new ListingsPage(page);
  await listings.goto();
  await expect(page.getByText("No job boards yet")).toBeVisible();

  await listings.addSource("Acme", "greenhouse", boardUrl("/greenhouse/acme"));
  await listings.addSource("Rust Jobs Weekly", "rss", boardUrl("/feeds/rust.rss"));
  await expect(listings.sourceChip("Acme")).toHaveText("never");

  await listings.fetchButton.click();
  // Greenhouse's 3 and the feed's 2, one of which is Greenhouse's 4001 again.
  await expect(listings.toasts).toContainText("4 new listings from 2 boards");
  await expect(listings.sourceChip("Acme")).toHaveText("fetched");
  await expect(listings.sourceChip("Rust Jobs Weekly")).toHaveText("fetched");
  await expect(listings.rows).toHaveCount(4);
  await expect(listings.newBadges).toHaveCount(4);

  const backend = listings.listing("Backend Engineer (Rust)");
  await expect(backend).toHaveCount(1);
  await expect(backend.getByTestId("listing-sources")).toHaveText("Acme, Rust Jobs Weekly");
  await expect(page.getByText("Backend Engineer (Rust) at Acme Robotics")).toHaveCount(0);

  await listings.fetchButton.click();
  await expect(listings.toasts).toContainText("0 new listings from 2 boards");
  await expect(listings.newBadges).toHaveCount(0);
  await expect(listings.rows).toHaveCount(4);

  // A third board: only its own listings are new.
  await listings.addSource("Hooli", "rss", boardUrl("/feeds/hooli.atom"));
  await listings.fetchButton.click();
  await expect(listings.toasts).toContainText("2 new listings from 3 boards");
  await expect(listings.rows).toHaveCount(6);
  await expect(listings.newBadges).toHaveCount(2);
  await expect(listings.listing("Staff Engineer, Search").getByTestId("listing-new")).toBeVisible();
});

test("sources are checked: a bad URL is refused with a message and nothing is added", async ({ page }) => {
  await signInAsAdmin(page, "/admin/listings");
  const listings = new ListingsPage(page);
  await listings.goto();
  await page.getByLabel("Name").fill("Broken");
  await page.getByLabel("Kind").selectOption("lever");
  await page.getByLabel("URL").fill("ftp://boards.example/jobs");
  await page.getByRole("button", { name: "Add source" }).click();
  await expect(listings.toasts).toContainText("must start with http:// or https://");
  await expect(page.getByTestId("source-row")).toHaveCount(0);

  await listings.addSource("Globex", "lever", boardUrl("/lever/globex"));
  await listings.source("Globex").getByRole("button", { name: "Disable" }).click();
  await expect(listings.source("Globex")).toContainText("disabled");
  await listings.fetchButton.click();
  await expect(listings.toasts).toContainText("No source is enabled");
  await listings.source("Globex").getByRole("button", { name: "Enable" }).click();
  await expect(listings.source("Globex")).not.toContainText("disabled");
  await listings.source("Globex").getByRole("button", { name: "Remove Globex" }).click();
  await expect(page.getByRole("dialog")).toContainText("Remove the source Globex");
  await page.getByRole("dialog").getByRole("button", { name: "Remove source" }).click();
  await expect(page.getByTestId("source-row")).toHaveCount(0);
});
