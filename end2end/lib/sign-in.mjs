// Signs the admin of STANDMEET_ADMIN_EMAIL and STANDMEET_ADMIN_PASSWORD in through the
// login form, for the command-line tools beside the specs (weigh.mjs, timeline.mjs,
// look.mjs); the specs have their own fixture (tests/fixtures/admin.ts).

/** Signs in within `context`: its later pages are the admin's. */
export async function signIn(context, base) {
  const page = await context.newPage();
  await page.goto(`${base}/login`);
  await page.getByLabel("Email").fill(process.env.STANDMEET_ADMIN_EMAIL);
  await page.getByLabel("Password").fill(process.env.STANDMEET_ADMIN_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/admin/);
  await page.close();
}

/** The cookies of a signed-in admin, for fresh contexts that start with them. */
export async function signedInState(browser, base) {
  const context = await browser.newContext();
  await signIn(context, base);
  const state = await context.storageState();
  await context.close();
  return state;
}
