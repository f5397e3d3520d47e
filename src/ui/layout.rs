//! The frame around every page. Visitor pages: a header with the product name, the
//! visitor navigation (and, for a signed-in admin, one "Admin" link into the console)
//! and who is signed in, over the main column. Admin pages: a slim header, and the
//! admin navigation in a sidebar grouped the way operators think of the work. At phone
//! width either navigation folds behind the header's "Menu" button, so the header is
//! one row.

use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_location;

use crate::api::auth::current_admin;
use crate::ui::components::form::{SECONDARY_BUTTON, use_hydrated};
use crate::ui::components::theme::ThemeToggle;

/// The admin pages, in the order the navigation shows them.
pub const ADMIN_PAGES: [(&str, &str); 12] = [
    ("/admin", "Overview"),
    ("/admin/tasks", "Tasks"),
    ("/admin/queues", "Queues"),
    ("/admin/schedules", "Schedules"),
    ("/admin/access-requests", "Access requests"),
    ("/admin/bookings", "Bookings"),
    ("/admin/listings", "Listings"),
    ("/admin/corpus", "Corpus"),
    ("/admin/events", "Events"),
    ("/admin/webhooks", "Webhooks"),
    ("/admin/mail", "Mail log"),
    ("/admin/account", "Account"),
];

/// The visitor's pages, in the order the navigation shows them (to everyone).
pub const VISITOR_PAGES: [(&str, &str); 4] = [
    ("/search", "Search"),
    ("/request-access", "Request access"),
    ("/access", "Enter a code"),
    ("/book", "Book a meeting"),
];

/// The admin pages as the sidebar groups them (every page of [`ADMIN_PAGES`], once;
/// the last, unnamed, is the admin's own).
pub const ADMIN_GROUPS: [(&str, &[(&str, &str)]); 5] = [
    (
        "Work",
        &[
            ("/admin", "Overview"),
            ("/admin/tasks", "Tasks"),
            ("/admin/queues", "Queues"),
            ("/admin/schedules", "Schedules"),
        ],
    ),
    (
        "People",
        &[
            ("/admin/access-requests", "Access requests"),
            ("/admin/bookings", "Bookings"),
        ],
    ),
    (
        "Content",
        &[("/admin/corpus", "Corpus"), ("/admin/listings", "Listings")],
    ),
    (
        "Integrations",
        &[
            ("/admin/events", "Events"),
            ("/admin/webhooks", "Webhooks"),
            ("/admin/mail", "Mail log"),
        ],
    ),
    // The admin's own account, on its own below the groups.
    ("", &[("/admin/account", "Account")]),
];

/// A link in the admin sidebar: full width, the current page marked.
const SIDEBAR_LINK: &str = "block rounded-md px-3 py-1.5 text-sm text-slate-600 hover:bg-slate-100 hover:text-slate-900 focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600 aria-[current=page]:bg-slate-900 aria-[current=page]:text-white";

const NAV_LINK: &str = "block rounded-md px-3 py-1.5 text-slate-600 hover:bg-slate-100 hover:text-slate-900 focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600 aria-[current=page]:bg-slate-900 aria-[current=page]:text-white";

#[component]
pub fn Layout(children: Children) -> impl IntoView {
    let admin = Resource::new(|| (), |_| current_admin());
    let signed_in = move || matches!(admin.get(), Some(Ok(Some(_))));
    let location = use_location();
    let on_admin_page = move || location.pathname.get().starts_with("/admin");
    // The navigation at phone width: folded until the menu button opens it, which works
    // once the page is hydrated (until then the button says so by being disabled). A
    // visitor's page is not hydrated: its script (`ui/desk.js`) works the button.
    let menu_open = RwSignal::new(false);
    let hydrated = use_hydrated();
    view! {
        <header class="border-b border-slate-200 bg-white">
            <div class="mx-auto flex max-w-6xl flex-wrap items-center gap-x-3 gap-y-2 px-4 py-3 sm:gap-x-8 sm:px-6 sm:py-4">
                <a href="/" class="flex items-center gap-2 text-lg font-semibold tracking-tight text-slate-900">
                    <span aria-hidden="true" class="inline-block h-2.5 w-2.5 rounded-full bg-teal-600"></span>
                    "StandMeet"
                </a>
                <Show when=move || !on_admin_page()>
                    <VisitorNavigation signed_in=signed_in open=menu_open/>
                </Show>
                // Pushes the controls to the right where no navigation does.
                <div class=move || if on_admin_page() { "flex-1" } else { "flex-1 sm:hidden" }></div>
                <ThemeToggle/>
                <SignedIn admin=admin/>
                <button
                    type="button"
                    class=move || {
                        // Below the width where its navigation has room of its own.
                        let shown_until = if on_admin_page() { "md:hidden" } else { "sm:hidden" };
                        // Without scripting the navigation is always open (below).
                        format!("{SECONDARY_BUTTON} focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600 noscript:hidden {shown_until}")
                    }
                    aria-controls=move || if on_admin_page() { "admin-sidebar" } else { "visitor-navigation" }
                    aria-expanded=move || menu_open.get().to_string()
                    data-testid=move || if on_admin_page() { "admin-menu-button" } else { "visitor-menu-button" }
                    disabled=move || !hydrated.get()
                    on:click=move |_| menu_open.update(|open| *open = !*open)
                >
                    "Menu"
                </button>
            </div>
        </header>
        <div class=move || {
            if on_admin_page() {
                "mx-auto max-w-6xl px-6 md:flex md:gap-8"
            } else {
                "mx-auto max-w-6xl px-6"
            }
        }>
            <Show when=on_admin_page>
                <Transition fallback=|| ()>
                    <Show when=signed_in>
                        <AdminSidebar open=menu_open/>
                    </Show>
                </Transition>
            </Show>
            // Focusable from script only: where the keyboard lands when an action removed
            // the control it was on (see `components::focus`).
            <main tabindex="-1" class="min-w-0 flex-1 py-10 focus:outline-none">{children()}</main>
        </div>
    }
}

/// The visitor links in the header, and for a signed-in admin one "Admin" link into
/// the console (whose sidebar has the rest). From tablet width they stand in the
/// header's row; at phone width they fold behind the menu button, and open as a row
/// of their own under it.
#[component]
fn VisitorNavigation(
    signed_in: impl Fn() -> bool + Send + Sync + Copy + 'static,
    open: RwSignal<bool>,
) -> impl IntoView {
    view! {
        <nav
            id="visitor-navigation"
            aria-label="Visitor"
            class=move || {
                let shown = if open.get() { "flex" } else { "hidden" };
                // Without scripting nothing could open it: open from the start.
                format!("{shown} order-last basis-full flex-col gap-1 text-sm noscript:flex sm:order-none sm:flex sm:flex-1 sm:basis-auto sm:flex-row sm:flex-wrap")
            }
        >
            {VISITOR_PAGES
                .into_iter()
                .map(|(href, label)| view! { <A href=href attr:class=NAV_LINK>{label}</A> })
                .collect_view()}
            <Transition fallback=|| ()>
                <Show when=signed_in>
                    // rel="external": a full page load, so the server's admin guard sees
                    // the visit.
                    <A href="/admin" attr:rel="external" attr:class=NAV_LINK attr:data-testid="admin-link">"Admin"</A>
                </Show>
            </Transition>
        </nav>
    }
}

/// The admin navigation of the admin pages: a sidebar from tablet width up, folded
/// behind the header's menu button below it.
#[component]
fn AdminSidebar(open: RwSignal<bool>) -> impl IntoView {
    view! {
        <nav
            id="admin-sidebar"
            aria-label="Admin"
            data-testid="admin-sidebar"
            class=move || {
                let shown = if open.get() { "block" } else { "hidden" };
                format!("{shown} border-b border-slate-200 py-4 md:block md:w-52 md:shrink-0 md:border-b-0 md:py-10")
            }
        >
            {ADMIN_GROUPS
                .into_iter()
                .map(|(group, pages)| {
                    view! {
                        <div class="mb-5">
                            {(!group.is_empty())
                                .then(|| {
                                    view! {
                                        <p class="px-3 pb-1 text-xs font-semibold uppercase tracking-wide text-slate-500">
                                            {group}
                                        </p>
                                    }
                                })}
                            <ul class="space-y-0.5">
                                {pages
                                    .iter()
                                    .map(|(href, label)| {
                                        // rel="external": a full page load, so the server's
                                        // admin guard sees every visit to an admin page.
                                        view! {
                                            <li>
                                                <A href=*href exact=*href == "/admin" attr:rel="external" attr:class=SIDEBAR_LINK>
                                                    {*label}
                                                </A>
                                            </li>
                                        }
                                    })
                                    .collect_view()}
                            </ul>
                        </div>
                    }
                })
                .collect_view()}
        </nav>
    }
}

/// Who is signed in, with "Sign out"; or a "Sign in" link.
#[component]
fn SignedIn(admin: Resource<Result<Option<String>, ServerFnError>>) -> impl IntoView {
    view! {
        <div class="flex items-center gap-3 text-sm" data-testid="signed-in">
            <Transition fallback=|| ()>
                {move || {
                    admin
                        .get()
                        .map(|admin| match admin {
                            Ok(Some(email)) => {
                                view! {
                                    // At phone width the name gives its room to the buttons.
                                    <span class="hidden text-slate-500 sm:inline" data-testid="signed-in-email">{email}</span>
                                    <form method="post" action="/logout">
                                        <button type="submit" class=SECONDARY_BUTTON>
                                            "Sign out"
                                        </button>
                                    </form>
                                }
                                    .into_any()
                            }
                            _ => {
                                view! {
                                    <a href="/login" class="rounded-md px-3 py-1.5 font-medium text-teal-700 hover:bg-teal-50">
                                        "Sign in"
                                    </a>
                                }
                                    .into_any()
                            }
                        })
                }}
            </Transition>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sidebar_groups_every_admin_page_once() {
        let mut grouped: Vec<(&str, &str)> = ADMIN_GROUPS
            .iter()
            .flat_map(|(_, pages)| pages.iter().copied())
            .collect();
        let mut pages = ADMIN_PAGES.to_vec();
        grouped.sort();
        pages.sort();
        assert_eq!(grouped, pages);
    }
}
