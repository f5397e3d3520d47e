//! The front page: the owner (a name and a short introduction an admin sets on
//! `/admin/account`) and the ways in: search, request access, enter a code, book a
//! meeting. Nothing about the machinery (the health probe is `/healthz`).

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::front_page::{FrontPageView, front_page};
use crate::ui::components::form::{INPUT, PRIMARY_BUTTON, server_message};

/// The heading until the owner has given a name.
pub const UNNAMED_HEADING: &str = "The owner's front desk";

#[component]
pub fn HomePage() -> impl IntoView {
    let page = Resource::new(|| (), |_| front_page());
    view! {
        <Title text=""/>
        <Suspense fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(page) => view! { <FrontPage page=page/> }.into_any(),
                    Err(error) => view! {
                        <h1 class="text-3xl font-semibold tracking-tight">{UNNAMED_HEADING}</h1>
                        <p role="alert" class="mt-6 text-sm text-rose-800">{server_message(&error)}</p>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn FrontPage(page: FrontPageView) -> impl IntoView {
    let FrontPageView {
        owner_name,
        introduction_html,
        booking_open,
    } = page;
    let has_introduction = !introduction_html.is_empty();
    view! {
        <section class="max-w-2xl" aria-labelledby="front-heading">
            <h1 id="front-heading" data-testid="owner-name" class="text-3xl font-semibold tracking-tight">
                {owner_name.unwrap_or_else(|| UNNAMED_HEADING.to_string())}
            </h1>
            {has_introduction.then(|| view! {
                // Rendered from Markdown on the server, raw HTML and unsafe links taken
                // out (domain::front_page::introduction_html).
                <div data-testid="owner-introduction" class="introduction mt-4 text-lg leading-relaxed text-slate-700" inner_html=introduction_html></div>
            })}
        </section>

        <form method="get" action="/search" role="search" class="mt-10 flex max-w-2xl gap-3">
            <label for="front-search" class="sr-only">"Search the owner's writing"</label>
            <input id="front-search" name="q" type="search" class=INPUT placeholder="Search the owner's writing"/>
            <button type="submit" class=format!("mt-1 shrink-0 {PRIMARY_BUTTON}")>"Search"</button>
        </form>

        <ul class="mt-10 grid gap-4 sm:grid-cols-2 lg:grid-cols-3" aria-label="Ways in">
            <WayIn href="/request-access" title="Request access" text="Tell the owner who you are and why; you get a code by mail once they agree."/>
            <WayIn href="/access" title="Enter a code" text="Got a code from the owner? Enter it with your address to see what it opens."/>
            {booking_open.then(|| view! {
                <WayIn href="/book" title="Book a meeting" text="Pick a free time in the owner's calendar."/>
            })}
        </ul>
    }
}

#[component]
fn WayIn(href: &'static str, title: &'static str, text: &'static str) -> impl IntoView {
    view! {
        <li>
            <a href=href class="block h-full rounded-xl border border-slate-200 bg-white p-5 hover:border-slate-400 focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600">
                <span class="block font-semibold text-teal-700">{title}</span>
                <span class="mt-1 block text-sm text-slate-600">{text}</span>
            </a>
        </li>
    }
}
