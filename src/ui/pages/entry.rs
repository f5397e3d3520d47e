//! `/entries/<id>`: one corpus entry as a visitor reads it, under the same rules as the
//! search that links here (promoted entries; restricted ones only after `/access`).
//! Anything else is "Page not found", so a visitor cannot tell a restricted entry from
//! one that does not exist.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::corpus::public_entry;
use crate::ui::components::form::server_message;
use crate::ui::components::params::use_id_param;
use crate::ui::pages::not_found::NotFound;

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
                            <div data-testid="entry-body" class="mt-4 whitespace-pre-wrap break-words text-slate-800">{entry.body.clone()}</div>
                        </article>
                    }.into_any(),
                    Ok(None) => view! { <NotFound/> }.into_any(),
                    Err(error) => view! { <p role="alert" class="text-sm text-rose-800">{server_message(&error)}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}
