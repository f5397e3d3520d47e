//! The frame around every page: the header with the product name and the admin
//! navigation, and the main column.

use leptos::prelude::*;
use leptos_router::components::A;

/// The admin pages, in the order the navigation shows them.
pub const ADMIN_PAGES: [(&str, &str); 6] = [
    ("/admin/tasks", "Tasks"),
    ("/admin/access-requests", "Access requests"),
    ("/admin/listings", "Listings"),
    ("/admin/corpus", "Corpus"),
    ("/admin/mail", "Mail log"),
    ("/admin/account", "Account"),
];

#[component]
pub fn Layout(children: Children) -> impl IntoView {
    view! {
        <header class="border-b border-slate-200 bg-white">
            <div class="mx-auto flex max-w-6xl flex-wrap items-center gap-x-8 gap-y-2 px-6 py-4">
                <a href="/" class="flex items-center gap-2 text-lg font-semibold tracking-tight text-slate-900">
                    <span aria-hidden="true" class="inline-block h-2.5 w-2.5 rounded-full bg-teal-600"></span>
                    "StandMeet"
                </a>
                <nav aria-label="Admin" class="flex flex-wrap gap-1 text-sm">
                    {ADMIN_PAGES
                        .into_iter()
                        .map(|(href, label)| {
                            view! {
                                <A
                                    href=href
                                    attr:class="rounded-md px-3 py-1.5 text-slate-600 hover:bg-slate-100 hover:text-slate-900 aria-[current=page]:bg-slate-900 aria-[current=page]:text-white"
                                >
                                    {label}
                                </A>
                            }
                        })
                        .collect_view()}
                </nav>
            </div>
        </header>
        <main class="mx-auto max-w-6xl px-6 py-10">{children()}</main>
    }
}
