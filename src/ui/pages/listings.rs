//! `/admin/listings`: the job boards followed (add, enable / disable, remove), "Fetch
//! new" with a chip per source that follows its fetch, and the listings, newest first,
//! each once however many boards list it, with a "new" badge for what the newest fetch
//! found first.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::listings::{
    AddListingSource, FetchNewListings, ListingView, ListingsView, RemoveListingSource,
    SetSourceEnabled, SourceView, listings_overview,
};
use crate::model::{FetchAnswer, FetchState, JobId};
use crate::ui::components::confirm::use_confirm;
use crate::ui::components::focus;
use crate::ui::components::form::server_message;
use crate::ui::components::form::use_hydrated;
use crate::ui::components::form::{INPUT, LABEL, PRIMARY_BUTTON, SECONDARY_BUTTON};
use crate::ui::components::live::refetch_on_jobs;
use crate::ui::components::loaded::LoadError;
use crate::ui::components::status_chip::{StatusChip, Tone};
use crate::ui::components::toast::{Toasts, use_toasts};

fn fetch_tone(state: FetchState) -> Tone {
    match state {
        FetchState::Fetching => Tone::Active,
        FetchState::Fetched => Tone::Success,
        FetchState::Retrying => Tone::Warning,
        FetchState::Failed => Tone::Danger,
        FetchState::Never | FetchState::Cancelled => Tone::Muted,
    }
}

/// What the admin is told after "Fetch new".
fn tell_fetch(toasts: Toasts, answer: &FetchAnswer) {
    let boards = answer.job_ids.len();
    let boards_word = if boards == 1 { "board" } else { "boards" };
    if answer.pending {
        toasts.info(format!(
            "Fetch of {boards} {boards_word} queued: still running; the chips show when each is done."
        ));
        return;
    }
    let new = answer.new_count();
    toasts.success(format!(
        "{new} new listing{} from {boards} {boards_word}.",
        if new == 1 { "" } else { "s" }
    ));
    for failure in answer.errors.iter().flatten() {
        toasts.error(format!(
            "{} could not be fetched: {}",
            failure.source.clone().unwrap_or_else(|| "A source".into()),
            failure.error
        ));
    }
}

#[component]
pub fn ListingsPage() -> impl IntoView {
    let toasts = use_toasts();
    let overview = Resource::new(|| (), |_| listings_overview());
    let add = ServerAction::<AddListingSource>::new();
    let toggle = ServerAction::<SetSourceEnabled>::new();
    let remove = ServerAction::<RemoveListingSource>::new();
    let fetch = ServerAction::<FetchNewListings>::new();
    let hydrated = use_hydrated();

    let add_form = NodeRef::<leptos::html::Form>::new();
    let after = move |result: Option<Result<String, ServerFnError>>| match result {
        Some(Ok(message)) => {
            toasts.success(message);
            overview.refetch();
        }
        Some(Err(error)) => {
            toasts.error(server_message(&error));
            overview.refetch();
        }
        None => {}
    };
    Effect::new(move |_| {
        let result = add.value().get();
        if matches!(result, Some(Ok(_))) {
            // Added: the form is cleared for the next board.
            if let Some(form) = add_form.get_untracked() {
                form.reset();
            }
        }
        after(result);
    });
    Effect::new(move |_| after(toggle.value().get()));
    Effect::new(move |_| {
        overview.with(|_| ());
        focus::restore_after_render();
    });
    Effect::new(move |_| after(remove.value().get()));
    Effect::new(move |_| match fetch.value().get() {
        Some(Ok(answer)) => {
            tell_fetch(toasts, &answer);
            overview.refetch();
        }
        Some(Err(error)) => toasts.error(server_message(&error)),
        None => {}
    });
    // While "Fetch new" waits, the chips follow the fetches.
    Effect::new(move |_| {
        if fetch.pending().get() {
            overview.refetch();
        }
    });
    // Sources being fetched follow their fetch jobs live.
    refetch_on_jobs(overview, |view| {
        view.sources
            .iter()
            .filter(|s| s.fetch_state.is_moving())
            .filter_map(|s| s.job_id)
            .map(JobId)
            .collect()
    });

    view! {
        <Title text="Listings"/>
        <div class="flex flex-wrap items-center gap-4">
            <h1 class="text-2xl font-semibold tracking-tight">"Listings"</h1>
            <button type="button" class=format!("ml-auto {PRIMARY_BUTTON}")
                    disabled=move || !hydrated.get() || fetch.pending().get()
                    on:click=move |_| { fetch.dispatch(FetchNewListings {}); }>
                {move || if fetch.pending().get() { "Fetching…" } else { "Fetch new" }}
            </button>
        </div>
        <Transition fallback=|| view! { <p class="mt-6 text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match overview.await {
                    Ok(view) => view! { <ListingsBody view=view toggle=toggle remove=remove hydrated=hydrated/> }.into_any(),
                    Err(error) => view! { <LoadError error=error/> }.into_any(),
                }
            })}
        </Transition>
        <AddSourceForm add=add form=add_form hydrated=hydrated/>
    }
}

#[component]
fn ListingsBody(
    view: ListingsView,
    toggle: ServerAction<SetSourceEnabled>,
    remove: ServerAction<RemoveListingSource>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let ListingsView {
        sources,
        listings,
        more,
    } = view;
    let no_sources = sources.is_empty();
    let no_listings = listings.is_empty();
    view! {
        <section class="mt-6 rounded-xl border border-slate-200 bg-white">
            <h2 class="border-b border-slate-200 px-6 py-3 font-semibold">"Sources"</h2>
            {if no_sources {
                view! { <p class="px-6 py-4 text-sm text-slate-500">"No job boards yet: add one below."</p> }.into_any()
            } else {
                view! {
                    <ul class="divide-y divide-slate-100">
                        {sources.into_iter().map(|source| view! { <SourceRow source=source toggle=toggle remove=remove hydrated=hydrated/> }).collect_view()}
                    </ul>
                }.into_any()
            }}
        </section>
        <section class="mt-6 rounded-xl border border-slate-200 bg-white">
            <h2 class="border-b border-slate-200 px-6 py-3 font-semibold">"Listings"</h2>
            {if no_listings {
                view! { <p class="px-6 py-4 text-sm text-slate-500">"No listings yet: \"Fetch new\" asks every enabled board."</p> }.into_any()
            } else {
                view! {
                    <table class="w-full text-left text-sm">
                        <thead class="text-xs uppercase tracking-wide text-slate-500">
                            <tr>
                                <th class="px-6 py-2 font-medium">"Title"</th>
                                <th class="px-3 py-2 font-medium">"Company"</th>
                                <th class="px-3 py-2 font-medium">"Location"</th>
                                <th class="px-3 py-2 font-medium">"Posted"</th>
                                <th class="px-3 py-2 font-medium">"Seen on"</th>
                            </tr>
                        </thead>
                        <tbody class="divide-y divide-slate-100">
                            {listings.into_iter().map(|row| view! { <ListingRow row=row/> }).collect_view()}
                        </tbody>
                    </table>
                    {more.then(|| view! { <p class="px-6 py-3 text-xs text-slate-500">"Only the newest listings are shown."</p> })}
                }.into_any()
            }}
        </section>
    }
}

#[component]
fn SourceRow(
    source: SourceView,
    toggle: ServerAction<SetSourceEnabled>,
    remove: ServerAction<RemoveListingSource>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let confirm = use_confirm();
    let id = source.id;
    let enabled = source.enabled;
    let name = source.name.clone();
    let title = source
        .note
        .clone()
        .map(|note| format!("Last error: {note}"));
    view! {
        <li data-testid="source-row" data-source-id=id.to_string() class="flex flex-wrap items-center gap-3 px-6 py-3 text-sm">
            <div class="min-w-0 flex-1">
                <p class="font-medium">
                    <span data-testid="source-name">{source.name}</span>
                    <span class="ml-2 rounded bg-slate-100 px-1.5 py-0.5 text-xs text-slate-600">{source.kind}</span>
                    {(!enabled).then(|| view! { <span class="ml-2 text-xs text-slate-500">"disabled"</span> })}
                </p>
                <p class="truncate text-xs text-slate-500">{source.url}</p>
                {source.note.filter(|_| source.fetch_state != FetchState::Fetched).map(|note| view! {
                    <p data-testid="source-error" class="mt-1 text-xs text-rose-800">{note}</p>
                })}
            </div>
            <span class="text-xs text-slate-500">{format!("{} listings", source.listings)}</span>
            <StatusChip label=source.fetch_state.as_str() tone=fetch_tone(source.fetch_state) test_id="source-fetch-state" title=title.unwrap_or_default()/>
            <button type="button" class=SECONDARY_BUTTON disabled=move || !hydrated.get()
                    data-focus-key=format!("source-{id}-toggle")
                    on:click=move |_| { toggle.dispatch(SetSourceEnabled { id, enabled: !enabled }); }>
                {if enabled { "Disable" } else { "Enable" }}
            </button>
            <button type="button" class=SECONDARY_BUTTON disabled=move || !hydrated.get()
                    aria-label=format!("Remove {name}")
                    on:click={
                        let name = name.clone();
                        move |_| {
                            confirm.ask(
                                format!("Remove the source {name}, with its listings and fetch history?"),
                                "Remove source",
                                move || { remove.dispatch(RemoveListingSource { id }); },
                            );
                        }
                    }>
                "Remove"
            </button>
        </li>
    }
}

#[component]
fn ListingRow(row: ListingView) -> impl IntoView {
    let ListingView {
        listing,
        seen_on,
        posted,
    } = row;
    view! {
        <tr data-testid="listing-row" data-listing-id=listing.id.to_string() data-new=listing.new.to_string()>
            <td class="px-6 py-2">
                <a href=listing.url.clone() target="_blank" rel="noopener noreferrer" class="font-medium text-teal-800 hover:underline">{listing.title}</a>
                {listing.new.then(|| view! {
                    <span data-testid="listing-new" class="ml-2 rounded-full bg-emerald-100 px-2 py-0.5 text-xs font-medium text-emerald-800">"new"</span>
                })}
            </td>
            <td class="px-3 py-2">{listing.company.unwrap_or_default()}</td>
            <td class="px-3 py-2">{listing.location.unwrap_or_default()}</td>
            <td class="px-3 py-2 whitespace-nowrap text-slate-600">{posted.unwrap_or_default()}</td>
            <td data-testid="listing-sources" class="px-3 py-2 text-slate-600">{seen_on.join(", ")}</td>
        </tr>
    }
}

#[component]
fn AddSourceForm(
    add: ServerAction<AddListingSource>,
    form: NodeRef<leptos::html::Form>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    view! {
        <section class="mt-6 rounded-xl border border-slate-200 bg-white p-6">
            <h2 class="font-semibold">"Add a job board"</h2>
            <p class="mt-1 text-sm text-slate-600">
                "Greenhouse: https://boards-api.greenhouse.io/v1/boards/<board>/jobs · Lever: https://api.lever.co/v0/postings/<company>?mode=json · RSS or Atom: the feed's URL."
            </p>
            <ActionForm action=add node_ref=form attr:novalidate=true attr:class="mt-4 grid gap-3 sm:grid-cols-[1fr_10rem_2fr_auto] sm:items-end">
                <div>
                    <label for="source-name" class=LABEL>"Name"</label>
                    <input id="source-name" name="name" type="text" maxlength="100" class=INPUT/>
                </div>
                <div>
                    <label for="source-kind" class=LABEL>"Kind"</label>
                    <select id="source-kind" name="kind" class=INPUT>
                        <option value="greenhouse">"Greenhouse"</option>
                        <option value="lever">"Lever"</option>
                        <option value="rss">"RSS or Atom"</option>
                    </select>
                </div>
                <div>
                    <label for="source-url" class=LABEL>"URL"</label>
                    <input id="source-url" name="url" type="url" class=INPUT/>
                </div>
                <button type="submit" class=PRIMARY_BUTTON disabled=move || !hydrated.get() || add.pending().get()>"Add source"</button>
            </ActionForm>
        </section>
    }
}
