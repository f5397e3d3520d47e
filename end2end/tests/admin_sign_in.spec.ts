import { expect, test } from "@playwright/test";
import { ADMIN_EMAIL, LoginPage, signInAsAdmin } from "./fixtures/admin";

test("an anonymous visitor of an admin page is sent to sign in, and back after it", async ({ page }) => {
  await page.goto("/admin/mail");
  await expect(page).toHaveURL(/\/login\?next=%2Fadmin%2Fmail$/);

  const login = new LoginPage(page);
  await login.signIn();
  await expect(page).toHaveURL(/\/admin\/mail$/);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Mail log");
  await expect(page.getByTestId("signed-in-email")).toHaveText(ADMIN_EMAIL);
});

test("sign in, see the admin shell, sign out, and be sent to sign in again", async ({ page, context }) => {
  await signInAsAdmin(page);
  await expect(page.getByRole("navigation", { name: "Admin" }).getByRole("link", { name: "Tasks" })).toHaveAttribute(
    "aria-current",
    "page",
  );
  const cookie = (await context.cookies()).find((c) => c.name === "standmeet_session");
  expect(cookie?.httpOnly).toBe(true);
  expect(cookie?.sameSite).toBe("Strict");

  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page).toHaveURL(/\/login$/);
  await expect(page.getByRole("link", { name: "Sign in" })).toBeVisible();

  await page.goto("/admin/tasks");
  await expect(page).toHaveURL(/\/login\?next=%2Fadmin%2Ftasks$/);
});

test("a wrong password shows the message and makes no session", async ({ page, context }) => {
  const login = new LoginPage(page);
  await login.goto();
  await login.signIn(ADMIN_EMAIL, "not the password");
  await expect(login.problem).toHaveText("Wrong email or password.");
  // The email is kept for the next try; the password is not.
  await expect(login.email).toHaveValue(ADMIN_EMAIL);
  await expect(login.password).toHaveValue("");

  const session = (await context.cookies()).find((c) => c.name === "standmeet_session");
  expect(session).toBeUndefined();
  await page.goto("/admin/tasks");
  await expect(page).toHaveURL(/\/login/);
});

test("the hydrated pages run under the Content-Security-Policy without violations", async ({ page }) => {
  const violations: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") violations.push(message.text());
  });
  await signInAsAdmin(page);
  await page.goto("/");
  // A server function from the browser (the overview's figures) and a change of the page.
  await page.goto("/admin");
  await expect(page.getByTestId("overview-card").first()).toBeVisible();
  await expect(page.getByTestId("theme-toggle")).toBeEnabled();
  await page.getByTestId("theme-toggle").click();
  await expect(page.locator("html")).toHaveClass(/\b(dark|light)\b/);
  await page.goto("/");
  await expect(page.getByTestId("theme-toggle")).toBeEnabled();
  expect(violations).toEqual([]);
});

test("an anonymous visitor of the Tasks panel is sent to sign in", async ({ page }) => {
  await page.goto("/admin/tasks/1");
  await expect(page).toHaveURL(/\/login\?next=%2Fadmin%2Ftasks%2F1$/);
});
