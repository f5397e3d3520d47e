//! Which pages are hydrated. The console's are: they live on the app's code. A
//! visitor's are not: they are forms and links, whole as the server renders them, so
//! they are sent without the wasm and its loader (docs/reference/README.md#weight: a visitor's
//! first page within 100 KB, usable the moment it arrives). Their few niceties are the
//! inline script `ui/desk.js`; every form on them posts as plain HTML.

/// Whether the page being rendered comes with the app's code (the wasm and its
/// loader), to be hydrated: the console's pages do (`/admin…`, and `/account/…`, the
/// owner's own links); a visitor's pages do not. In the browser only hydrated pages run
/// this code, so there it is always true.
pub fn page_hydrates() -> bool {
    #[cfg(feature = "ssr")]
    {
        leptos::prelude::use_context::<axum::http::request::Parts>().is_none_or(|parts| {
            let path = parts.uri.path();
            path.starts_with("/admin") || path.starts_with("/account/")
        })
    }
    #[cfg(not(feature = "ssr"))]
    {
        true
    }
}

/// In the browser, whether the whole page is hydrated, its route's chunk of code
/// included: each page is a lazy route (`ui::lazy_pages`) whose code is fetched before
/// its part of the page can hydrate, after the app's shell has. [`crate::hydrate`]
/// provides it and sets it once hydration has finished; until then a click on the
/// page's buttons would do nothing.
#[derive(Clone)]
pub struct PageHydrated(pub leptos::prelude::ArcRwSignal<bool>);

/// [`PageHydrated`] as a signal; false where nothing provides it (on the server).
pub fn use_page_hydrated() -> leptos::prelude::Signal<bool> {
    use leptos::prelude::*;
    match use_context::<PageHydrated>() {
        Some(PageHydrated(done)) => Signal::derive(move || done.get()),
        None => Signal::stored(false),
    }
}
