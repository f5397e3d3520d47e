//! `/search?q=`: visitors search the promoted entries (restricted ones too after they
//! redeemed an access code at `/access`). Results show a snippet with the matched
//! terms marked; a search without results says so, and a bad one says what is wrong.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::corpus::{SearchAnswer, search_corpus};
use crate::ui::components::form::{INPUT, PRIMARY_BUTTON};

#[component]
pub fn SearchPage() -> impl IntoView {
    let query = use_query_map();
    let q = Memo::new(move |_| query.read().get("q").unwrap_or_default());
    let answer = Resource::new(
        move || q.get(),
        |q| async move {
            if q.trim().is_empty() {
                None
            } else {
                Some(search_corpus(q).await)
            }
        },
    );

    view! {
        <Title text="Search"/>
        <section class="mx-auto mt-6 max-w-2xl">
            <h1 class="text-2xl font-semibold tracking-tight">"Search"</h1>
            <form method="get" action="/search" role="search" class="mt-4 flex gap-3">
                <label for="search-q" class="sr-only">"Search"</label>
                <input id="search-q" name="q" type="search" class=INPUT placeholder="What are you looking for?"
                       value=move || q.get()/>
                <button type="submit" class=PRIMARY_BUTTON>"Search"</button>
            </form>
            <Suspense fallback=|| view! { <p class="mt-6 text-sm text-slate-500">"Searching…"</p> }>
                {move || Suspend::new(async move {
                    match answer.await {
                        None => view! { <p class="mt-6 text-sm text-slate-500">"Search the owner's entries by word; Chinese, Japanese and Korean text works without spaces."</p> }.into_any(),
                        Some(Ok(answer)) => view! { <Results answer=answer/> }.into_any(),
                        Some(Err(error)) => view! {
                            <p role="alert" data-testid="search-error" class="mt-6 rounded-md border border-rose-200 bg-rose-50 px-4 py-3 text-sm text-rose-900">{error.message}</p>
                        }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn Results(answer: SearchAnswer) -> impl IntoView {
    let SearchAnswer {
        query,
        hits,
        restricted_included,
    } = answer;
    if hits.is_empty() {
        return view! {
            <div data-testid="search-empty" class="mt-6 rounded-xl border border-slate-200 bg-white px-6 py-5">
                <p class="font-medium">{format!("No results for “{query}”.")}</p>
                <p class="mt-1 text-sm text-slate-600">
                    {if restricted_included {
                        "Try fewer or other words."
                    } else {
                        "Try fewer or other words. Some entries are only for visitors with an access code."
                    }}
                </p>
            </div>
        }
        .into_any();
    }
    let count = hits.len();
    view! {
        <p class="mt-6 text-sm text-slate-500">{format!("{count} result{} for “{query}”", if count == 1 { "" } else { "s" })}</p>
        <ol class="mt-3 space-y-3">
            {hits.into_iter().map(|hit| view! {
                <li data-testid="search-result" data-entry-id=hit.id.to_string() class="rounded-xl border border-slate-200 bg-white px-5 py-4">
                    <h2 class="font-semibold">
                        <a href=format!("/entries/{}", hit.id) data-testid="search-result-link" class="text-teal-800 hover:underline">{hit.title}</a>
                        {hit.restricted.then(|| view! { <span class="ml-2 rounded bg-amber-100 px-1.5 py-0.5 text-xs font-medium text-amber-900">"restricted"</span> })}
                    </h2>
                    <p data-testid="search-snippet" class="mt-1 text-sm text-slate-700">
                        {hit.snippet.into_iter().map(|piece| if piece.mark {
                            view! { <mark class="rounded bg-amber-200 px-0.5 text-slate-900">{piece.text}</mark> }.into_any()
                        } else {
                            piece.text.into_any()
                        }).collect_view()}
                    </p>
                </li>
            }).collect_view()}
        </ol>
    }
    .into_any()
}
