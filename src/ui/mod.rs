//! The user interface: the HTML shell, the app with its routes, the layout every page
//! lives in, the pages and the components they share. Compiled for the server (which
//! renders it) and for the browser (which hydrates it).

pub mod components;
pub mod hydration;
pub mod layout;
pub mod pages;

use leptos::nonce::use_nonce;
use leptos::prelude::*;
use leptos_meta::{HashedStylesheet, MetaTags, Title, provide_meta_context};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{SsrMode, path};

use crate::ui::components::confirm::{Confirm, ConfirmDialog};
use crate::ui::components::toast::{ToastRegion, Toasts};
use crate::ui::layout::Layout;
use crate::ui::pages::{
    access::AccessPage,
    access_requests::AccessRequestsPage,
    account::AccountPage,
    book::{BookPage, CancelBookingPage},
    bookings::BookingsPage,
    confirm_email::ConfirmEmailPage,
    corpus::{CorpusEntryPage, CorpusPage},
    entry::EntryPage,
    events::EventsPage,
    home::HomePage,
    listings::ListingsPage,
    login::LoginPage,
    mail_log::MailLogPage,
    not_found::NotFound,
    overview::OverviewPage,
    queues::QueuesPage,
    request_access::RequestAccessPage,
    schedules::SchedulesPage,
    search::SearchPage,
    task_detail::TaskDetailPage,
    tasks::TasksPage,
    webhooks::{WebhookDetailPage, WebhooksPage},
};

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
    // In the browser, once hydrated: note which keyed control has the focus, listen for
    // the keyboard shortcuts (`/`, `g t`, …; `<html data-shortcuts="on">` says so), and
    // say that the page is hydrated, which enables every button at once.
    let hydrated = crate::ui::components::form::provide_hydrated();
    Effect::new(move |_| {
        crate::ui::components::focus::install();
        crate::ui::components::shortcuts::install();
        hydrated.set(true);
    });

    view! {
        <Title formatter=|page: String| {
            if page.is_empty() { "StandMeet".to_string() } else { format!("{page} · StandMeet") }
        }/>
        <Router>
            <Layout>
                <Routes fallback=NotFound>
                    <Route path=path!("/") view=HomePage ssr=SsrMode::Async/>
                    <Route path=path!("/login") view=LoginPage ssr=SsrMode::Async/>
                    // Admin pages (product.md section 5); each arrives with its issue.
                    // Rendered whole before the first byte is sent, so that a shared link
                    // shows the rows without JavaScript and a missing job answers 404.
                    <Route path=path!("/admin") view=OverviewPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/tasks") view=TasksPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/tasks/:id") view=TaskDetailPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/queues") view=QueuesPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/schedules") view=SchedulesPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/access-requests") view=AccessRequestsPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/listings") view=ListingsPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/corpus") view=CorpusPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/corpus/:id") view=CorpusEntryPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/mail") view=MailLogPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/events") view=EventsPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/webhooks") view=WebhooksPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/webhooks/:id") view=WebhookDetailPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/bookings") view=BookingsPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/account") view=AccountPage ssr=SsrMode::Async/>
                    // Visitor pages.
                    // Rendered whole, so that they read the same without JavaScript.
                    <Route path=path!("/request-access") view=RequestAccessPage ssr=SsrMode::Async/>
                    <Route path=path!("/access") view=AccessPage ssr=SsrMode::Async/>
                    <Route path=path!("/account/confirm-email") view=ConfirmEmailPage ssr=SsrMode::Async/>
                    <Route path=path!("/search") view=SearchPage ssr=SsrMode::Async/>
                    <Route path=path!("/book") view=BookPage ssr=SsrMode::Async/>
                    <Route path=path!("/book/cancel") view=CancelBookingPage ssr=SsrMode::Async/>
                    <Route path=path!("/entries/:id") view=EntryPage ssr=SsrMode::Async/>
                </Routes>
            </Layout>
        </Router>
        <ToastRegion/>
        <ConfirmDialog/>
    }
}
