//! Every page as a lazy route: in the browser the pages' code comes in wasm chunks,
//! fetched when a page of theirs is first shown, so a console page downloads the app's
//! shell and its own group of pages rather than all of them (docs/benchmarks.md, "A
//! first visit"). The jobs' pages, which an admin opens first, are in the shell itself
//! ([`shell_pages!`]): a chunk would cost them a second step after the shell, fetching
//! and compiling it before hydration goes on, which on a slow phone took longer than
//! their code takes to download with the shell.
//! `scripts/build` cuts the chunks out of the wasm (`wasm_split_cli`); the server names
//! the chunks a page needs in its `<head>`, so they download beside the shell instead
//! of after it. Visitor pages are never hydrated (`hydration::page_hydrates`), so their
//! chunks are never fetched at all.
//!
//! A route carries no data of its own: each page starts its own resources, whose
//! results come with the page's HTML on a first load. (Leptos' `#[lazy_route]` would
//! give each page a chunk of its own; the groups are why the split is written here.)

use leptos::prelude::*;
use leptos_router::LazyRoute;

/// `Route => module::Page, loader in group`: a unit type `Route` whose view, the
/// component `ui::pages::module::Page`, is loaded by the function `loader` with the
/// chunk `group`.
///
/// Pages are cut into a few groups rather than one chunk each: the splitter gives the
/// code that several chunks share chunks of its own, one per set of sharers, and with a
/// chunk per page a console page needed 90 to 240 files, which a browser fetches six at
/// a time over HTTP/1.1 (docs/benchmarks.md, "A first visit"). Each group holds pages
/// that are used together and share most of their code.
macro_rules! lazy_pages {
    ($($route:ident => $module:ident::$page:ident, $loader:ident in $group:ident;)*) => {
        $(
            #[doc = concat!("The lazily loaded route of [`", stringify!($page), "`].")]
            pub struct $route;

            // In the browser, a split point: calling `$loader` fetches the group's
            // chunk first; `preload` fetches it without showing the page.
            #[doc(hidden)]
            pub mod $loader {
                use crate::ui::pages::$module::$page;
                use leptos::prelude::*;

                #[cfg_attr(
                    feature = "hydrate",
                    leptos::wasm_split::wasm_split(
                        $group,
                        wasm_split_path = ::leptos::wasm_split,
                        preload(preload)
                    )
                )]
                pub fn $loader() -> AnyView {
                    view! { <$page/> }.into_any()
                }
            }

            impl LazyRoute for $route {
                fn data() -> Self {
                    $route
                }

                async fn view(_route: Self) -> AnyView {
                    #[cfg(feature = "hydrate")]
                    {
                        $loader::$loader().await
                    }
                    #[cfg(not(feature = "hydrate"))]
                    {
                        #[cfg(feature = "ssr")]
                        preload_group(stringify!($group));
                        $loader::$loader()
                    }
                }

                // Hydration awaits this before it hydrates the page (and the router
                // before it shows one): the page's view must then be at hand at once.
                async fn preload() {
                    #[cfg(feature = "hydrate")]
                    $loader::preload().await;
                }
            }
        )*
    };
}

/// `Route => module::Page`: a route like those of [`lazy_pages!`] whose page is in the
/// app's shell, not in a chunk: its view is at hand as soon as the shell is.
macro_rules! shell_pages {
    ($($route:ident => $module:ident::$page:ident;)*) => {
        $(
            #[doc = concat!("The route of [`", stringify!($page), "`], in the app's shell.")]
            pub struct $route;

            impl LazyRoute for $route {
                fn data() -> Self {
                    $route
                }

                async fn view(_route: Self) -> AnyView {
                    #[cfg(feature = "ssr")]
                    preload_group("");
                    view! { <crate::ui::pages::$module::$page/> }.into_any()
                }
            }
        )*
    };
}

shell_pages! {
    // The jobs: what an admin opens first.
    OverviewRoute => overview::OverviewPage;
    TasksRoute => tasks::TasksPage;
    TaskDetailRoute => task_detail::TaskDetailPage;
}

lazy_pages! {
    // The engine's other views.
    QueuesRoute => queues::QueuesPage, queues_page in console_engine;
    SchedulesRoute => schedules::SchedulesPage, schedules_page in console_engine;
    EventsRoute => events::EventsPage, events_page in console_engine;
    MailLogRoute => mail_log::MailLogPage, mail_log_page in console_engine;
    // People: who asks, who books, the owner's own account.
    AccessRequestsRoute => access_requests::AccessRequestsPage, access_requests_page in console_people;
    BookingsRoute => bookings::BookingsPage, bookings_page in console_people;
    AccountRoute => account::AccountPage, account_page in console_people;
    ConfirmEmailRoute => confirm_email::ConfirmEmailPage, confirm_email_page in console_people;
    // Content: listings, the corpus, and the webhooks that carry it out.
    ListingsRoute => listings::ListingsPage, listings_page in console_content;
    CorpusRoute => corpus::CorpusPage, corpus_page in console_content;
    CorpusEntryRoute => corpus::CorpusEntryPage, corpus_entry_page in console_content;
    WebhooksRoute => webhooks::WebhooksPage, webhooks_page in console_content;
    WebhookDetailRoute => webhooks::WebhookDetailPage, webhook_detail_page in console_content;
    // A visitor's pages are not hydrated: their chunk is fetched only when a console
    // page links to one and the app shows it without a page load.
    HomeRoute => home::HomePage, home_page in visitor;
    LoginRoute => login::LoginPage, login_page in visitor;
    RequestAccessRoute => request_access::RequestAccessPage, request_access_page in visitor;
    AccessRoute => access::AccessPage, access_page in visitor;
    SearchRoute => search::SearchPage, search_page in visitor;
    BookRoute => book::BookPage, book_page in visitor;
    CancelBookingRoute => book::CancelBookingPage, cancel_booking_page in visitor;
    EntryRoute => entry::EntryPage, entry_page in visitor;
}

/// Names the files a console page needs in `Link: <…>; rel=preload` headers of its
/// response (such a page renders whole before its headers go), so that the browser
/// fetches them at once rather than once the app's shell has run and asked for its
/// page's group (on a slow phone that was a second and a half later): first the shell
/// (the wasm, which compiles as it arrives, and its JavaScript), then the group's files.
/// Only a page that carries the app's code has the split's manifest (`HydrationScripts`
/// reads it).
///
/// Leptos' own way, `prefetch_lazy_fn_on_server`, names the group's files in the
/// `<head>`, but its axum integration looks the manifest up outside the page's reactive
/// owner, finds none, and names nothing (leptos_integration_utils 0.8.9).
#[cfg(feature = "ssr")]
fn preload_group(group: &str) {
    use axum::http::{HeaderValue, header::LINK};
    use leptos::WasmSplitManifest;
    use leptos_axum::ResponseOptions;

    let (Some(WasmSplitManifest(manifest)), Some(response), Some(site)) = (
        use_context::<WasmSplitManifest>(),
        use_context::<ResponseOptions>(),
        use_context::<std::sync::Arc<crate::assets::SiteFiles>>(),
    ) else {
        return;
    };
    let wasm_link = |pkg: &str, file: &str| {
        format!("<{pkg}/{file}>; rel=preload; as=fetch; type=\"application/wasm\"; crossorigin")
    };
    let links = manifest.with_value(|(pkg, files_by_group, loader)| {
        let (shell_wasm, shell_js) = site.shell_code();
        let mut links = vec![
            wasm_link(pkg, shell_wasm),
            format!("<{pkg}/{shell_js}>; rel=modulepreload"),
            format!("<{pkg}/{loader}>; rel=modulepreload"),
        ];
        let files = files_by_group
            .get(group)
            .map(Vec::as_slice)
            .unwrap_or_default();
        links.extend(
            files
                .iter()
                .map(|file| wasm_link(pkg, &format!("{file}.wasm"))),
        );
        links
    });
    for link in links {
        if let Ok(value) = HeaderValue::from_str(&link) {
            response.append_header(LINK, value);
        }
    }
}
