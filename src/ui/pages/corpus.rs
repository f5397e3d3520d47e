//! `/admin/corpus`: the entries, newest first, each with its index chip (indexed,
//! indexing, failed) that follows its index job; a form to write one; Promote; and the
//! admin's "grep", a substring search over titles and texts (`?grep=`).
//! `/admin/corpus/<id>`: one entry, to edit.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::corpus::{
    CreateCorpusEntry, EntryView, PromoteCorpusEntry, UpdateCorpusEntry, WriteReceipt,
    corpus_entries, corpus_entry,
};
use crate::api::vault::{RebuildVault, RebuildView, VaultView, vault_status};
use crate::model::JobId;
use crate::ui::components::focus;
use crate::ui::components::form::server_message;
use crate::ui::components::form::use_hydrated;
use crate::ui::components::form::{INPUT, LABEL, PRIMARY_BUTTON, SECONDARY_BUTTON};
use crate::ui::components::live::refetch_on_jobs;
use crate::ui::components::loaded::LoadError;
use crate::ui::components::params::use_id_param;
use crate::ui::components::status_chip::{StatusChip, Tone, job_state_tone};
use crate::ui::components::table::{
    ACTION_CELL, BODY, CELL, HEAD, HEAD_CELL, ROW, TABLE, TABLE_CARD,
};
use crate::ui::components::tags::Tags;
use crate::ui::components::toast::{Toasts, use_toasts};
use crate::ui::pages::entry::ENTRY_BODY;

fn index_tone(state: &str) -> Tone {
    match state {
        "indexed" => Tone::Success,
        "indexing" => Tone::Active,
        _ => Tone::Danger,
    }
}

fn status_tone(status: &str) -> Tone {
    if status == "promoted" {
        Tone::Success
    } else {
        Tone::Muted
    }
}

/// Tells the admin what a write's receipt says, then reloads the page's data.
fn after_write(
    toasts: Toasts,
    result: Option<Result<WriteReceipt, ServerFnError>>,
    verb: &str,
    reload: impl Fn(),
) {
    match result {
        Some(Ok(receipt)) => {
            toasts.success(receipt.message(verb));
            reload();
        }
        Some(Err(error)) => toasts.error(server_message(&error)),
        None => {}
    }
}

#[component]
pub fn CorpusPage() -> impl IntoView {
    let toasts = use_toasts();
    let query = use_query_map();
    let grep = Memo::new(move |_| query.read().get("grep").filter(|g| !g.trim().is_empty()));
    let entries = Resource::new(move || grep.get(), corpus_entries);
    let create = ServerAction::<CreateCorpusEntry>::new();
    let promote = ServerAction::<PromoteCorpusEntry>::new();
    let hydrated = use_hydrated();
    let create_form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        after_write(
            toasts,
            create.value().get(),
            "saved as a draft",
            move || {
                // Written: the form is cleared for the next entry.
                if let Some(form) = create_form.get_untracked() {
                    form.reset();
                }
                entries.refetch();
            },
        )
    });
    Effect::new(move |_| {
        after_write(toasts, promote.value().get(), "promoted", move || {
            entries.refetch()
        })
    });
    Effect::new(move |_| {
        entries.with(|_| ());
        focus::restore_after_render();
    });
    // Entries being indexed follow their index jobs live.
    refetch_on_jobs(entries, |rows| {
        rows.iter()
            .filter(|row| row.index_state == "indexing")
            .filter_map(|row| row.index_job_id)
            .map(JobId)
            .collect()
    });

    view! {
        <Title text="Corpus"/>
        <h1 class="text-2xl font-semibold tracking-tight">"Corpus"</h1>
        <VaultPanel on_rebuilt=move || entries.refetch()/>
        <form method="get" action="/admin/corpus" role="search" class="mt-6 flex flex-wrap items-end gap-3">
            <div class="min-w-72 flex-1">
                <label for="corpus-grep" class=LABEL>"Grep"</label>
                <input id="corpus-grep" name="grep" type="search" placeholder="a word, or part of one, in any title or text" class=INPUT value=move || grep.get().unwrap_or_default()/>
            </div>
            <button type="submit" class=SECONDARY_BUTTON>"Find"</button>
            {move || grep.get().map(|_| view! { <a href="/admin/corpus" rel="external" class="text-sm text-teal-800 hover:underline">"Show all"</a> })}
        </form>
        <Transition fallback=|| view! { <p class="mt-6 text-sm text-slate-500">"Loading entries…"</p> }>
            {move || Suspend::new(async move {
                match entries.await {
                    Ok(rows) => view! { <EntryTable rows=rows grep=grep.get_untracked() promote=promote hydrated=hydrated/> }.into_any(),
                    Err(error) => view! { <LoadError error=error/> }.into_any(),
                }
            })}
        </Transition>
        <section class="mt-6 rounded-xl border border-slate-200 bg-white p-6">
            <h2 class="font-semibold">"Write an entry"</h2>
            <p class="mt-1 text-sm text-slate-600">"New entries are drafts: visitors find them once promoted."</p>
            <ActionForm action=create node_ref=create_form attr:novalidate=true attr:class="mt-4 space-y-3">
                <EntryFields entry=None/>
                <button type="submit" class=PRIMARY_BUTTON disabled=move || !hydrated.get() || create.pending().get()>"Create entry"</button>
            </ActionForm>
        </section>
    }
}

/// Title, text and visibility, empty or filled from `entry`.
#[component]
fn EntryFields(entry: Option<EntryView>) -> impl IntoView {
    let (title, body, visibility) = entry
        .map(|e| (e.title, e.body, e.visibility))
        .unwrap_or_else(|| (String::new(), String::new(), "public".into()));
    let restricted = visibility == "restricted";
    view! {
        <div>
            <label for="entry-title" class=LABEL>"Title"</label>
            <input id="entry-title" name="title" type="text" maxlength="300" class=INPUT value=title/>
        </div>
        <div>
            <label for="entry-body" class=LABEL>"Body"</label>
            <textarea id="entry-body" name="body" rows="6" class=INPUT>{body}</textarea>
        </div>
        <div class="max-w-xs">
            <label for="entry-visibility" class=LABEL>"Visibility"</label>
            <select id="entry-visibility" name="visibility" class=INPUT>
                <option value="public" selected=!restricted>"Public"</option>
                <option value="restricted" selected=restricted>"Restricted (after an access code)"</option>
            </select>
        </div>
    }
}

#[component]
fn EntryTable(
    rows: Vec<EntryView>,
    grep: Option<String>,
    promote: ServerAction<PromoteCorpusEntry>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    if rows.is_empty() {
        let message = match grep {
            Some(needle) => format!("No entry contains “{needle}”."),
            None => "No entries yet: write the first one below.".into(),
        };
        return view! { <p data-testid="corpus-empty" class="mt-6 rounded-xl border border-slate-200 bg-white px-6 py-4 text-sm text-slate-600">{message}</p> }.into_any();
    }
    view! {
        <div class=TABLE_CARD>
        <table class=TABLE>
            <thead class=HEAD>
                <tr>
                    <th class=HEAD_CELL>"Title"</th>
                    <th class=HEAD_CELL>"Visibility"</th>
                    <th class=HEAD_CELL>"Status"</th>
                    <th class=HEAD_CELL>"Index"</th>
                    <th class=HEAD_CELL>"Changed"</th>
                    <th class=HEAD_CELL></th>
                </tr>
            </thead>
            <tbody class=BODY>
                {rows.into_iter().map(|row| {
                    let id = row.id;
                    // An entry made from a vault note is changed in the note: no edit here.
                    let from_note = row.note_path.is_some();
                    let draft = row.status == "draft" && !from_note;
                    let title = row.index_error.clone().map(|e| format!("Last error: {e}")).unwrap_or_default();
                    view! {
                        <tr data-testid="corpus-row" data-entry-id=id.to_string() class=ROW>
                            <td class=CELL data-label="Title">
                                <div class="min-w-0">
                                    <a href=format!("/admin/corpus/{id}") rel="external" class="font-medium text-teal-800 hover:underline">{row.title}</a>
                                    {row.note_path.map(|path| view! {
                                        <p class="mt-0.5 break-all text-xs text-slate-500" data-testid="entry-note">{format!("from the vault: {path}")}</p>
                                    })}
                                </div>
                            </td>
                            <td class=CELL data-label="Visibility" data-testid="entry-visibility">{row.visibility}</td>
                            <td class=CELL data-label="Status"><StatusChip label=row.status.clone() tone=status_tone(&row.status) test_id="entry-status"/></td>
                            <td class=CELL data-label="Index"><StatusChip label=row.index_state.clone() tone=index_tone(&row.index_state) test_id="index-state" title=title/></td>
                            <td class=format!("{CELL} md:whitespace-nowrap text-slate-600") data-label="Changed">{row.updated}</td>
                            <td class=format!("{ACTION_CELL} md:text-right md:whitespace-nowrap")>
                                {(!from_note).then(|| view! {
                                    <a href=format!("/admin/corpus/{id}") rel="external" class=format!("mr-2 inline-block {SECONDARY_BUTTON}")>"Edit"</a>
                                })}
                                {draft.then(|| view! {
                                    <button type="button" class=SECONDARY_BUTTON disabled=move || !hydrated.get() || promote.pending().get()
                                            data-focus-key=format!("entry-{id}-promote")
                                            on:click=move |_| { promote.dispatch(PromoteCorpusEntry { id }); }>"Promote"</button>
                                })}
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
        </div>
    }.into_any()
}

#[component]
pub fn CorpusEntryPage() -> impl IntoView {
    let toasts = use_toasts();
    let id = use_id_param();
    let entry = Resource::new(
        move || id.get(),
        |id| async move {
            match id {
                Some(id) => corpus_entry(id).await,
                None => Err(ServerFnError::new("There is no such entry.")),
            }
        },
    );
    let save = ServerAction::<UpdateCorpusEntry>::new();
    let promote = ServerAction::<PromoteCorpusEntry>::new();
    let hydrated = use_hydrated();
    Effect::new(move |_| after_write(toasts, save.value().get(), "saved", move || entry.refetch()));
    Effect::new(move |_| {
        after_write(toasts, promote.value().get(), "promoted", move || {
            entry.refetch()
        })
    });
    Effect::new(move |_| {
        entry.with(|_| ());
        focus::restore_after_render();
    });
    refetch_on_jobs(entry, |e| {
        e.index_job_id
            .filter(|_| e.index_state == "indexing")
            .map(JobId)
            .into_iter()
            .collect()
    });

    view! {
        <Title text="Corpus entry"/>
        <a href="/admin/corpus" rel="external" class="text-sm text-teal-800 hover:underline">"← All entries"</a>
        <Transition fallback=|| view! { <p class="mt-6 text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match entry.await {
                    Ok(entry) => {
                        let id = entry.id;
                        let note_path = entry.note_path.clone();
                        let tags = entry.tags.clone();
                        let draft = entry.status == "draft" && note_path.is_none();
                        let preview_html = entry.preview_html.clone().unwrap_or_default();
                        view! {
                            <div class="mt-4 flex flex-wrap items-center gap-3">
                                <h1 class="text-2xl font-semibold tracking-tight">{format!("Entry {id}")}</h1>
                                <StatusChip label=entry.status.clone() tone=status_tone(&entry.status) test_id="entry-status"/>
                                <StatusChip label=entry.index_state.clone() tone=index_tone(&entry.index_state) test_id="index-state"/>
                                <span class="text-sm text-slate-500">{format!("version {}, changed {}", entry.version, entry.updated)}</span>
                                {draft.then(|| view! {
                                    <button type="button" class=format!("ml-auto {SECONDARY_BUTTON}") disabled=move || !hydrated.get() || promote.pending().get()
                                            data-focus-key=format!("entry-{id}-promote")
                                            on:click=move |_| { promote.dispatch(PromoteCorpusEntry { id }); }>"Promote"</button>
                                })}
                            </div>
                            {match note_path {
                                // The note is the source: an edit here would be undone by the
                                // next rebuild, so there is none to make.
                                Some(path) => view! {
                                    <p data-testid="entry-note" class="mt-6 rounded-xl border border-slate-200 bg-white p-6 text-sm text-slate-700">
                                        "Made from the note " <code class="break-all font-mono">{path}</code>
                                        " in the vault. Change the note, and the next rebuild brings the change here."
                                    </p>
                                    <Tags tags=tags/>
                                }.into_any(),
                                None => view! {
                                    <ActionForm action=save attr:novalidate=true attr:class="mt-6 space-y-3 rounded-xl border border-slate-200 bg-white p-6">
                                        <input type="hidden" name="id" value=id.to_string()/>
                                        <EntryFields entry=Some(entry)/>
                                        <button type="submit" class=PRIMARY_BUTTON data-focus-key="entry-save" disabled=move || !hydrated.get() || save.pending().get()>"Save"</button>
                                    </ActionForm>
                                }.into_any(),
                            }}
                            <section class="mt-6 rounded-xl border border-slate-200 bg-white p-6" aria-labelledby="entry-preview-heading">
                                <h2 id="entry-preview-heading" class="font-semibold">"Preview"</h2>
                                <p class="mt-1 text-sm text-slate-600">"The saved text as visitors read it (links to other entries go to their admin pages here)."</p>
                                <div data-testid="entry-preview" class=ENTRY_BODY inner_html=preview_html></div>
                            </section>
                        }.into_any()
                    }
                    Err(error) => view! { <LoadError error=error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// The vault's panel (only with a vault): "Rebuild from vault", and the newest rebuild:
/// its chip, then its counts, the notes that failed, and its post-build hooks' chips,
/// all followed live.
#[component]
fn VaultPanel(on_rebuilt: impl Fn() + Clone + Send + Sync + 'static) -> impl IntoView {
    let toasts = use_toasts();
    let status = Resource::new(|| (), |_| vault_status());
    let rebuild = ServerAction::<RebuildVault>::new();
    let hydrated = use_hydrated();
    Effect::new(move |_| match rebuild.value().get() {
        Some(Ok(message)) => {
            toasts.info(message);
            status.refetch();
        }
        Some(Err(error)) => toasts.error(server_message(&error)),
        None => {}
    });
    // The rebuild's job while it runs, and its post-build hooks' deliveries.
    let watched = |view: &Option<VaultView>| {
        view.as_ref()
            .and_then(|view| view.last.as_ref())
            .map(|last| {
                let mut ids: Vec<JobId> = last
                    .hooks
                    .iter()
                    .filter_map(|hook| hook.pending_job_id)
                    .map(JobId)
                    .collect();
                if !last.state.is_terminal() {
                    ids.push(JobId(last.job_id));
                }
                ids
            })
            .unwrap_or_default()
    };
    // The entries change when a rebuild ends, however the page learns of it: from the
    // stream, from the poll, or from the status read right after "Rebuild from vault"
    // when the rebuild was over by then (a quick one ends before the page follows it).
    // So the list is read again here, once for each rebuild seen to end while the page
    // is open, and not on the first read (the list is fresh then).
    // `None` until the first read; then the newest rebuild seen (`None`: there was none)
    // and whether it had ended.
    let last_seen = StoredValue::new(None::<Option<(i64, bool)>>);
    Effect::new(move |_| {
        let Some(Ok(Some(view))) = status.get() else {
            return;
        };
        let now = view
            .last
            .map(|last| (last.job_id, last.state.is_terminal()));
        let before = last_seen.get_value();
        last_seen.set_value(Some(now));
        let ended = now.is_some_and(|(_, ended)| ended);
        if ended && before.is_some_and(|before| before != now) {
            on_rebuilt();
        }
    });
    refetch_on_jobs(status, watched);
    view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                match status.await {
                    Ok(Some(view)) => view! { <VaultSection view=view rebuild=rebuild hydrated=hydrated/> }.into_any(),
                    Ok(None) => ().into_any(),
                    Err(error) => view! { <LoadError error=error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn VaultSection(
    view: VaultView,
    rebuild: ServerAction<RebuildVault>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    view! {
        <section data-testid="vault" class="mt-6 rounded-xl border border-slate-200 bg-white p-6" aria-labelledby="vault-heading">
            <div class="flex flex-wrap items-center gap-3">
                <h2 id="vault-heading" class="font-semibold">"Vault"</h2>
                <p class="text-sm text-slate-600">"Entries from your Obsidian vault: a rebuild adds new notes, updates changed ones and removes those that are gone."</p>
                <button type="button" class=format!("sm:ml-auto {SECONDARY_BUTTON}") disabled=move || !hydrated.get() || rebuild.pending().get()
                        data-focus-key="vault-rebuild"
                        on:click=move |_| { rebuild.dispatch(RebuildVault { allow_removals: false }); }>
                    "Rebuild from vault"
                </button>
            </div>
            {match view.last {
                None => view! { <p class="mt-3 text-sm text-slate-500">"No rebuild yet."</p> }.into_any(),
                Some(last) => view! { <LastRebuild last=last rebuild=rebuild hydrated=hydrated/> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn LastRebuild(
    last: RebuildView,
    rebuild: ServerAction<RebuildVault>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let RebuildView {
        job_id,
        state,
        counts,
        error,
        hooks,
    } = last;
    view! {
        <div class="mt-4 space-y-3 text-sm">
            <p class="flex flex-wrap items-center gap-2">
                "Last rebuild: "
                <a href=format!("/admin/tasks/{job_id}") class="font-mono text-teal-800 hover:underline">{format!("#{job_id}")}</a>
                <StatusChip label=state.as_str() tone=job_state_tone(state) test_id="vault-rebuild-state"/>
            </p>
            {error.map(|error| view! { <p role="alert" class="text-rose-800">{error}</p> })}
            {counts.map(|counts| view! {
                <dl data-testid="vault-rebuild-counts" class="flex flex-wrap gap-x-6 gap-y-2">
                    {[("added", counts.added), ("updated", counts.updated), ("removed", counts.removed), ("unchanged", counts.unchanged), ("failed", counts.failed.len() as u64)]
                        .into_iter()
                        .map(|(word, count)| view! {
                            <div data-testid="vault-count" data-count-of=word data-count=count.to_string()>
                                <dt class="text-xs text-slate-500">{word}</dt>
                                <dd class="font-medium tabular-nums">{count}</dd>
                            </div>
                        })
                        .collect_view()}
                </dl>
                {(counts.would_remove > 0).then(|| {
                    let kept = counts.would_remove;
                    view! {
                        <div role="alert" data-testid="vault-would-remove" data-count=kept.to_string()
                             class="flex flex-wrap items-center gap-3 rounded border border-amber-300 bg-amber-50 px-3 py-2 text-amber-900">
                            <p>{match kept { 1 => "1 entry's note is gone".to_string(), n => format!("{n} entries' notes are gone") }}
                               ", more than half of the vault's: they were kept, in case the folder is only half synced or a mount is missing. If the notes were deleted on purpose, remove their entries."</p>
                            <button type="button" data-testid="vault-remove-confirm" class=SECONDARY_BUTTON
                                    disabled=move || !hydrated.get() || rebuild.pending().get()
                                    on:click=move |_| { rebuild.dispatch(RebuildVault { allow_removals: true }); }>
                                {format!("Remove {kept} entries")}
                            </button>
                        </div>
                    }
                })}
                {(!counts.failed.is_empty()).then(|| view! {
                    <details class="rounded border border-amber-300 bg-amber-50 px-3 py-2">
                        <summary class="cursor-pointer text-amber-900">{match counts.failed.len() { 1 => "1 note was not imported".to_string(), n => format!("{n} notes were not imported") }}</summary>
                        <ul class="mt-2 space-y-1">
                            {counts.failed.into_iter().map(|(path, why)| view! {
                                <li data-testid="vault-failed-note"><span class="font-mono">{path}</span>": "{why}</li>
                            }).collect_view()}
                        </ul>
                    </details>
                })}
            })}
            <div>
                <h3 class="text-xs font-medium uppercase tracking-wide text-slate-500">"Post-build hooks"</h3>
                {if hooks.is_empty() {
                    view! { <p class="mt-1 text-slate-500">"None: subscribe a webhook endpoint to corpus.rebuilt to have one."</p> }.into_any()
                } else {
                    view! {
                        <ul class="mt-1 space-y-1">
                            {hooks.into_iter().map(|hook| {
                                let tone = match hook.state.as_str() {
                                    "delivered" => Tone::Success,
                                    "failed" => Tone::Danger,
                                    _ => Tone::Active,
                                };
                                view! {
                                    <li data-testid="vault-hook" class="flex flex-wrap items-center gap-2">
                                        <a href=format!("/admin/webhooks/{}", hook.endpoint_id) class="break-all text-teal-800 hover:underline">{hook.url}</a>
                                        <StatusChip label=hook.state tone=tone test_id="hook-state"/>
                                    </li>
                                }
                            }).collect_view()}
                        </ul>
                    }.into_any()
                }}
            </div>
        </div>
    }
}
