// The one script of a visitor's page (`crate::ui::page_hydrates`): such a page comes
// without the app's wasm, whole as the server rendered it, and this inline script (the
// page's nonce admits it) does what would otherwise wait for hydration. Everything here
// is a nicety: every form on these pages posts as plain HTML and works without it, and
// `noscript:` classes show the no-script forms of the header and the booking page.
// It mirrors the hydrated components: `components/theme.rs`, the Menu button of
// `layout.rs`, the `/` key of `components/shortcuts.rs` and the slot picking of
// `pages/book.rs`. Keep them saying the same.
(() => {
  const root = document.documentElement;
  const byTestId = (id) => document.querySelector(`[data-testid="${id}"]`);

  // Dark mode: the chosen mode, else the system's; a choice is remembered in the
  // cookie the server reads to render the next page in it.
  const theme = byTestId("theme-toggle");
  const isDark = () =>
    root.classList.contains("dark") ||
    (!root.classList.contains("light") && matchMedia("(prefers-color-scheme: dark)").matches);
  if (theme) {
    theme.setAttribute("aria-pressed", String(isDark()));
    theme.addEventListener("click", () => {
      const dark = !isDark();
      root.classList.remove(dark ? "light" : "dark");
      root.classList.add(dark ? "dark" : "light");
      document.cookie = `standmeet_theme=${dark ? "dark" : "light"}; Path=/; Max-Age=31536000; SameSite=Lax`;
      theme.setAttribute("aria-pressed", String(dark));
    });
  }

  // The navigation at phone width, folded behind the Menu button.
  const menu = byTestId("visitor-menu-button");
  const nav = document.getElementById("visitor-navigation");
  if (menu && nav) {
    menu.addEventListener("click", () => {
      const open = menu.getAttribute("aria-expanded") !== "true";
      menu.setAttribute("aria-expanded", String(open));
      nav.classList.toggle("hidden", !open);
      nav.classList.toggle("flex", open);
    });
  }

  // Keyboard: `/` puts the focus in the page's search box, as on the console's pages
  // (`components/shortcuts.rs`; the `g` jumps are the console's own). A key typed into
  // a field, or with Ctrl, Alt or Meta held, is left alone.
  document.addEventListener("keydown", (event) => {
    if (event.key !== "/" || event.ctrlKey || event.altKey || event.metaKey || event.defaultPrevented) return;
    const target = event.target;
    if (target instanceof Element && (target.matches("input, textarea, select") || target.isContentEditable)) return;
    const search = document.querySelector("main input[type=search]");
    if (!search) return;
    event.preventDefault();
    search.focus();
  });
  root.setAttribute("data-shortcuts", "on");

  // A form the server refused comes back empty: the server sends the browser back to
  // the page, with the error in the address (`__err`), and the page is rendered anew.
  // What the visitor typed is kept for this tab on sending, and put back then. Never a
  // password; hidden fields are the page's own.
  const KEPT = "standmeet.sent-form";
  const typed = (field) => field.name && !["password", "hidden", "submit", "button"].includes(field.type);
  for (const form of document.querySelectorAll('form[method="post"]')) {
    form.addEventListener("submit", () => {
      const fields = Object.fromEntries([...form.elements].filter(typed).map((field) => [field.name, field.value]));
      sessionStorage.setItem(KEPT, JSON.stringify({ action: form.getAttribute("action"), fields }));
    });
  }
  const kept = JSON.parse(sessionStorage.getItem(KEPT) ?? "null");
  sessionStorage.removeItem(KEPT);
  if (kept && new URLSearchParams(location.search).has("__err")) {
    const form = [...document.forms].find((candidate) => candidate.getAttribute("action") === kept.action);
    for (const field of form ? [...form.elements].filter(typed) : []) {
      if (!field.value && field.name in kept.fields) field.value = kept.fields[field.name];
    }
  }

  // A moment's day ("Monday 7 December") and time ("09:00") in the browser's zone.
  const labels = (moment) => {
    const date = new Date(moment);
    if (Number.isNaN(date.getTime())) return null;
    const day = date
      .toLocaleDateString("en-GB", { weekday: "long", day: "numeric", month: "long" })
      .replaceAll(",", "");
    const time = date.toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
    return { day, time };
  };
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;

  // The booking page: the free times in the visitor's zone, grouped by their day
  // there; a button picks one into the form's hidden field.
  const slots = document.getElementById("booking-slots");
  const picked = document.getElementById("booking-start");
  const list = document.getElementById("booking-time");
  if (slots && picked && list) {
    picked.disabled = false;
    list.disabled = true;
    const buttons = [...slots.querySelectorAll('[data-testid="slot"]')];
    if (zone && buttons.every((button) => labels(button.dataset.start))) {
      const dayClass = slots.querySelector("h2")?.className ?? "";
      const rowClass = slots.querySelector("h2 + div")?.className ?? "";
      const days = new Map();
      for (const button of buttons) {
        const { day, time } = labels(button.dataset.start);
        button.textContent = time;
        if (!days.has(day)) days.set(day, []);
        days.get(day).push(button);
      }
      slots.replaceChildren(
        ...[...days].map(([day, dayButtons]) => {
          const section = document.createElement("section");
          const heading = document.createElement("h2");
          heading.className = dayClass;
          heading.textContent = day;
          const row = document.createElement("div");
          row.className = rowClass;
          row.append(...dayButtons);
          section.append(heading, row);
          return section;
        }),
      );
      const note = byTestId("booking-zone");
      if (note) note.textContent = `Times are shown in your time zone (${zone}).`;
    }
    const form = document.getElementById("booking-form");
    const chosen = byTestId("selected-slot");
    const say = (text) => {
      form.querySelector('[role="alert"]')?.remove();
      if (!text) return;
      const alert = document.createElement("p");
      alert.setAttribute("role", "alert");
      alert.className = "mt-4 rounded-md border border-rose-200 bg-rose-50 px-3 py-2 text-sm text-rose-900";
      alert.textContent = text;
      form.querySelector('button[type="submit"]').before(alert);
    };
    slots.addEventListener("click", (event) => {
      const button = event.target.closest('[data-testid="slot"]');
      if (!button) return;
      for (const other of buttons) other.setAttribute("aria-pressed", String(other === button));
      picked.value = button.dataset.start;
      const { day, time } = labels(button.dataset.start) ?? {};
      if (chosen && day) chosen.textContent = `Your time: ${day}, ${time}`;
      say(null);
    });
    form?.addEventListener("submit", (event) => {
      if (picked.value) return;
      event.preventDefault();
      say("Pick one of the free times first.");
    });
  }

  // The cancel link's page: the meeting's time where the visitor is, too.
  const when = byTestId("cancel-booking-when");
  const moment = when?.dataset.start && labels(when.dataset.start);
  if (moment) {
    const there = document.createElement("p");
    there.className = "text-sm text-slate-600";
    there.textContent = `That is ${moment.day}, ${moment.time} where you are.`;
    when.after(there);
  }
})();
