//! The user interface: the HTML shell, the app with its routes, the layout every page
//! lives in, the pages and the components they share. Compiled for the server (which
//! renders it) and for the browser (which hydrates it).

pub mod components;
pub mod hydration;
pub mod layout;
pub mod lazy_pages;
pub mod pages;
#[cfg(feature = "ssr")]
pub mod request_owner;

use leptos::nonce::use_nonce;
use leptos::prelude::*;
use leptos_meta::{HashedStylesheet, MetaTags, Title, provide_meta_context};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{Lazy, SsrMode, path};

use crate::ui::components::confirm::{Confirm, ConfirmDialog};
use crate::ui::components::toast::{ToastRegion, Toasts};
use crate::ui::layout::Layout;
use crate::ui::lazy_pages::*;
use crate::ui::pages::not_found::NotFound;

/// The visitor pages' one script, inline (the page's nonce admits it): the header's
/// Menu and Dark mode buttons, and the booking page's times in the visitor's own zone.
/// Every form works without it; see the file's notes. ([`hydration::page_hydrates`]
/// says which pages.)
const DESK_SCRIPT: &str = include_str!("desk.js");

/// The HTML document around the app; the server renders it for every page.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    let hydrates = hydration::page_hydrates();
    let desk_script = (!hydrates).then(|| {
        view! { <script nonce=use_nonce() inner_html=DESK_SCRIPT></script> }
    });
    view! {
        <!DOCTYPE html>
        <html lang="en" class=crate::ui::components::theme::requested_theme_class()>
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" type="image/svg+xml" href="/favicon.svg"/>
                <AutoReload options=options.clone()/>
                // The files' names carry their hash when the build made them so
                // (src/assets.rs).
                <HashedStylesheet options=options.clone() id="leptos"/>
                {hydrates.then(|| view! { <HydrationScripts options/> })}
                <MetaTags/>
            </head>
            <body class="min-h-screen bg-slate-50 text-slate-900 antialiased">
                <App/>
                {desk_script}
            </body>
        </html>
    }
}

/// Every page of StandMeet, in the shared layout.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    Toasts::provide();
    Confirm::provide();
    // In the browser, once the whole page is hydrated (its route's chunk of code too):
    // note which keyed control has the focus, listen for the keyboard shortcuts (`/`,
    // `g t`, …; `<html data-shortcuts="on">` says so), and say that the page is
    // hydrated, which enables every button at once.
    let hydrated = crate::ui::components::form::provide_hydrated();
    let page_hydrated = hydration::use_page_hydrated();
    Effect::new(move |_| {
        if page_hydrated.get() {
            crate::ui::components::focus::install();
            crate::ui::components::shortcuts::install();
            hydrated.set(true);
        }
    });

    view! {
        <Title formatter=|page: String| {
            if page.is_empty() { "StandMeet".to_string() } else { format!("{page} · StandMeet") }
        }/>
        <Router>
            <Layout>
                <Routes fallback=NotFound>
                    <Route path=path!("/") view={Lazy::<HomeRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/login") view={Lazy::<LoginRoute>::new()} ssr=SsrMode::Async/>
                    // Admin pages (docs/reference/pages.md); each arrives with its issue.
                    // Rendered whole before the first byte is sent, so that a shared link
                    // shows the rows without JavaScript and a missing job answers 404.
                    <Route path=path!("/admin") view={Lazy::<OverviewRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/tasks") view={Lazy::<TasksRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/tasks/:id") view={Lazy::<TaskDetailRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/queues") view={Lazy::<QueuesRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/schedules") view={Lazy::<SchedulesRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/access-requests") view={Lazy::<AccessRequestsRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/listings") view={Lazy::<ListingsRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/corpus") view={Lazy::<CorpusRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/corpus/:id") view={Lazy::<CorpusEntryRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/mail") view={Lazy::<MailLogRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/events") view={Lazy::<EventsRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/webhooks") view={Lazy::<WebhooksRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/webhooks/:id") view={Lazy::<WebhookDetailRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/bookings") view={Lazy::<BookingsRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin/account") view={Lazy::<AccountRoute>::new()} ssr=SsrMode::Async/>
                    // Visitor pages.
                    // Rendered whole, so that they read the same without JavaScript.
                    <Route path=path!("/request-access") view={Lazy::<RequestAccessRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/access") view={Lazy::<AccessRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/account/confirm-email") view={Lazy::<ConfirmEmailRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/search") view={Lazy::<SearchRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/book") view={Lazy::<BookRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/book/cancel") view={Lazy::<CancelBookingRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/entries/:id") view={Lazy::<EntryRoute>::new()} ssr=SsrMode::Async/>
                </Routes>
            </Layout>
        </Router>
        <ToastRegion/>
        <ConfirmDialog/>
    }
}
