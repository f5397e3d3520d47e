import { expect, test } from "@playwright/test";
import { signInAsAdmin } from "./fixtures/admin";
import { HomePage } from "./fixtures/home_page";

test("the home page is rendered on the server, with the shell and the visitor navigation", async ({ request }) => {
  // A plain HTTP GET runs no JavaScript: whatever is here came from the server.
  const response = await request.get("/");
  expect(response.status()).toBe(200);
  const html = await response.text();
  // No name set yet: the neutral heading, and the ways in.
  expect(html).toMatch(/<h1[^>]*>The owner(&#x27;|')s front desk(<!>)?<\/h1>/);
  expect(html).not.toContain("Check the service");
  expect(html).toContain(">StandMeet<");
  for (const href of ["/search", "/request-access", "/access"]) {
    expect(html).toContain(`href="${href}"`);
  }
  // Admin links are for a signed-in admin only.
  for (const href of ["/admin/tasks", "/admin/access-requests", "/admin/mail", "/admin/account"]) {
    expect(html).not.toContain(`href="${href}"`);
  }
  expect(html).toContain('role="status"');
  // The stylesheet is referenced by a name that carries its content's hash. A visitor's
  // page comes without the app's code (docs/reference/README.md#weight): no hydration script, no wasm.
  expect(html).toMatch(/\/pkg\/standmeet\.[\w-]{22}\.css/);
  expect(html).not.toContain(".wasm");
  expect(html).not.toMatch(/\/pkg\/standmeet\.[\w-]{22}\.js/);
});

test("the hashed files are kept for a year, the plain names are checked before each use", async ({ page }) => {
  // The console's pages name all three (the hydration script, the wasm, the CSS).
  await signInAsAdmin(page, "/admin");
  const request = page.request;
  const html = await (await request.get("/admin")).text();
  for (const kind of ["js", "wasm", "css"]) {
    const hashed = html.match(new RegExp(`/pkg/standmeet\\.[\\w-]{22}\\.${kind}`))![0];
    const kept = await request.get(hashed);
    expect(kept.status(), hashed).toBe(200);
    expect(kept.headers()["cache-control"]).toBe("public, max-age=31536000, immutable");
    // The plain name answers the same file, to be asked about again.
    const plain = await request.get(`/pkg/standmeet.${kind}`);
    expect(plain.status()).toBe(200);
    expect(plain.headers()["cache-control"]).toBe("no-cache");
    expect((await plain.body()).equals(await kept.body())).toBe(true);
  }
  // A name this release does not have is not kept.
  const unknown = await request.get("/pkg/standmeet.AAAAAAAAAAAAAAAAAAAAAA.css");
  expect(unknown.status()).toBe(404);
  expect(unknown.headers()["cache-control"]).not.toContain("immutable");
});

test("after hydration, Dark mode turns the page dark and the choice is remembered", async ({ page }) => {
  const home = new HomePage(page);
  await home.goto();
  const html = page.locator("html");
  const pressed = await home.themeToggle.getAttribute("aria-pressed");
  // The browser of the tests asks for light: the page follows it until a choice.
  expect(pressed).toBe("false");
  const lightBackground = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  await home.themeToggle.click();
  await expect(html).toHaveClass(/\bdark\b/);
  await expect(home.themeToggle).toHaveAttribute("aria-pressed", "true");
  const darkBackground = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  expect(darkBackground).not.toBe(lightBackground);
  // Remembered: the server renders the next page dark from its first byte.
  await page.reload();
  await expect(html).toHaveClass(/\bdark\b/);
  await expect(home.themeToggle).toBeEnabled();
  await expect(home.themeToggle).toHaveAttribute("aria-pressed", "true");
  await home.themeToggle.click();
  await expect(html).toHaveClass(/\blight\b/);
  await page.goto("/search");
  await expect(html).toHaveClass(/\blight\b/);
});

test("Tailwind's stylesheet is served and applied", async ({ page, request }) => {
  const css = await request.get("/pkg/standmeet.css");
  expect(css.status()).toBe(200);
  expect(css.headers()["content-type"]).toContain("text/css");
  const text = await css.text();
  // Utilities used in src/ are generated, unused ones are not.
  expect(text).toContain(".bg-teal-700");
  expect(text).not.toContain(".bg-fuchsia-900");

  const home = new HomePage(page);
  await home.goto();
  // bg-slate-50 on <body> and bg-teal-700 on the search button: the browser applied the CSS.
  const bodyBackground = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  expect(bodyBackground).not.toBe("rgba(0, 0, 0, 0)");
  const buttonBackground = await home.searchButton.evaluate((el) => getComputedStyle(el).backgroundColor);
  expect(buttonBackground).not.toBe("rgba(0, 0, 0, 0)");
});

test("the admin navigation reaches every admin page and marks the current one", async ({ page }) => {
  await signInAsAdmin(page, "/");
  const home = new HomePage(page);
  // The visitor header has one way into the console; the console's sidebar has the rest.
  await expect(home.adminNav).toHaveCount(0);
  await home.adminLink.click();
  await expect(page).toHaveURL(/\/admin$/);
  await home.adminNav.getByRole("link", { name: "Tasks" }).click();
  await expect(page).toHaveURL(/\/admin\/tasks$/);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Tasks");
  await expect(home.adminNav.getByRole("link", { name: "Tasks" })).toHaveAttribute("aria-current", "page");
  await expect(page).toHaveTitle("Tasks · StandMeet");
});

test("an unknown address answers 404 with a page that says so", async ({ page }) => {
  const response = await page.goto("/no/such/page");
  expect(response?.status()).toBe(404);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Page not found");
});
