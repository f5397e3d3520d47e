//! `/entries/<id>`: one corpus entry as a visitor reads it, under the same rules as the
//! search that links here (promoted entries; restricted ones only after `/access`).
//! Anything else is "Page not found", so a visitor cannot tell a restricted entry from
//! one that does not exist.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::corpus::public_entry;
use crate::ui::components::loaded::LoadError;
use crate::ui::components::params::use_id_param;
use crate::ui::components::tags::Tags;
use crate::ui::pages::not_found::NotFound;

/// An entry's rendered Markdown, readable without a typography plugin: spacing between
/// blocks, list markers, headings a step larger, links that look like links.
pub const ENTRY_BODY: &str = "mt-4 break-words text-slate-800 [&_a]:text-teal-800 [&_a]:underline [&_blockquote]:border-l-4 [&_blockquote]:border-slate-300 [&_blockquote]:pl-4 [&_code]:rounded [&_code]:bg-slate-100 [&_code]:px-1 [&_h1]:text-xl [&_h1]:font-semibold [&_h2]:text-lg [&_h2]:font-semibold [&_h3]:font-semibold [&_ol]:list-decimal [&_ol]:pl-6 [&_pre]:overflow-x-auto [&_pre]:rounded [&_pre]:bg-slate-100 [&_pre]:p-3 [&_ul]:list-disc [&_ul]:pl-6 space-y-3";

#[component]
pub fn EntryPage() -> impl IntoView {
    let id = use_id_param();
    let entry = Resource::new(
        move || id.get(),
        |id| async move {
            match id {
                Some(id) => public_entry(id).await,
                None => Ok(None),
            }
        },
    );
    view! {
        <Suspense fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match entry.await {
                    Ok(Some(entry)) => view! {
                        <Title text=entry.title.clone()/>
                        <a href="/search" class="text-sm text-teal-800 hover:underline">"← Search"</a>
                        <article data-testid="entry" data-entry-id=entry.id.to_string() class="mt-4 rounded-xl border border-slate-200 bg-white px-6 py-5">
                            <h1 data-testid="entry-title" class="text-2xl font-semibold tracking-tight">
                                {entry.title.clone()}
                                {entry.restricted.then(|| view! { <span class="ml-2 align-middle rounded bg-amber-100 px-1.5 py-0.5 text-xs font-medium text-amber-900">"restricted"</span> })}
                            </h1>
                            <Tags tags=entry.tags.clone()/>
                            <div data-testid="entry-body" class=ENTRY_BODY inner_html=entry.body_html.clone()></div>
                        </article>
                    }.into_any(),
                    Ok(None) => view! { <NotFound/> }.into_any(),
                    Err(error) => view! { <LoadError error=error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}
