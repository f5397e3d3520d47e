//! The frame around every page: the header with the product name, the admin
//! navigation and who is signed in, and the main column.

use leptos::prelude::*;
use leptos_router::components::A;

use crate::api::auth::current_admin;
use crate::ui::components::form::SECONDARY_BUTTON;

/// The admin pages, in the order the navigation shows them.
pub const ADMIN_PAGES: [(&str, &str); 10] = [
    ("/admin/tasks", "Tasks"),
    ("/admin/queues", "Queues"),
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

const NAV_LINK: &str = "rounded-md px-3 py-1.5 text-slate-600 hover:bg-slate-100 hover:text-slate-900 focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600 aria-[current=page]:bg-slate-900 aria-[current=page]:text-white";

#[component]
pub fn Layout(children: Children) -> impl IntoView {
    let admin = Resource::new(|| (), |_| current_admin());
    let signed_in = move || matches!(admin.get(), Some(Ok(Some(_))));
    view! {
        <header class="border-b border-slate-200 bg-white">
            <div class="mx-auto flex max-w-6xl flex-wrap items-center gap-x-8 gap-y-2 px-6 py-4">
                <a href="/" class="flex items-center gap-2 text-lg font-semibold tracking-tight text-slate-900">
                    <span aria-hidden="true" class="inline-block h-2.5 w-2.5 rounded-full bg-teal-600"></span>
                    "StandMeet"
                </a>
                <div class="flex flex-1 flex-col gap-1">
                    <nav aria-label="Visitor" class="flex flex-wrap gap-1 text-sm">
                        {VISITOR_PAGES
                            .into_iter()
                            .map(|(href, label)| view! { <A href=href attr:class=NAV_LINK>{label}</A> })
                            .collect_view()}
                    </nav>
                    // Admin links for a signed-in admin only.
                    <Transition fallback=|| ()>
                        <Show when=signed_in>
                            <nav aria-label="Admin" class="flex flex-wrap gap-1 text-sm">
                                {ADMIN_PAGES
                                    .into_iter()
                                    .map(|(href, label)| {
                                        // rel="external": a full page load, so the server's
                                        // admin guard sees every visit to an admin page.
                                        view! { <A href=href attr:rel="external" attr:class=NAV_LINK>{label}</A> }
                                    })
                                    .collect_view()}
                            </nav>
                        </Show>
                    </Transition>
                </div>
                <SignedIn admin=admin/>
            </div>
        </header>
        // Focusable from script only: where the keyboard lands when an action removed
        // the control it was on (see `components::focus`).
        <main tabindex="-1" class="mx-auto max-w-6xl px-6 py-10 focus:outline-none">{children()}</main>
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
                                    <span class="text-slate-500" data-testid="signed-in-email">{email}</span>
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
