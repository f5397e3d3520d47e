//! `/admin/tasks`: every job, newest first, with its state, attempts and last error;
//! counts by state; filters by state, kind and queue kept in the URL (so a shared link
//! shows the same view, rendered on the server); keyset paging. Chips of unfinished
//! rows follow their jobs by polling (one request for all of them), and new jobs appear
//! at the top of the first page.

use std::time::Duration;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::tasks::{StateCount, TaskPage, TaskQuery, TaskRow, list_tasks};
use crate::model::JobState;
use crate::ui::components::form::server_message;
use crate::ui::components::form::{LABEL, PRIMARY_BUTTON};
use crate::ui::components::live::use_live_rows;
use crate::ui::components::poll::use_polling;
use crate::ui::components::status_chip::JobStateChip;

/// The query of this page as it is in the URL.
fn current_query(query: &leptos_router::params::ParamsMap) -> TaskQuery {
    let text = |name: &str| query.get(name).filter(|value| !value.trim().is_empty());
    TaskQuery {
        state: text("state"),
        kind: text("kind"),
        queue: text("queue"),
        before: query.get("before").and_then(|value| value.parse().ok()),
        after: None,
    }
}

/// A link to this page with `query`.
fn link(query: &TaskQuery) -> String {
    let mut url = url_query();
    for (name, value) in [
        ("state", query.state.clone()),
        ("kind", query.kind.clone()),
        ("queue", query.queue.clone()),
        ("before", query.before.map(|id| id.to_string())),
    ] {
        if let Some(value) = value {
            url.append_pair(name, &value);
        }
    }
    let query = url.finish();
    if query.is_empty() {
        "/admin/tasks".to_string()
    } else {
        format!("/admin/tasks?{query}")
    }
}

fn url_query() -> form_urlencoded_lite::Serializer {
    form_urlencoded_lite::Serializer::default()
}

/// A tiny `application/x-www-form-urlencoded` writer (the browser side has no `url`
/// crate, and this is all the page needs).
mod form_urlencoded_lite {
    #[derive(Default)]
    pub struct Serializer(String);

    impl Serializer {
        pub fn append_pair(&mut self, name: &str, value: &str) {
            if !self.0.is_empty() {
                self.0.push('&');
            }
            self.0.push_str(&encode(name));
            self.0.push('=');
            self.0.push_str(&encode(value));
        }

        pub fn finish(self) -> String {
            self.0
        }
    }

    fn encode(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for byte in text.bytes() {
            match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    out.push(byte as char)
                }
                b' ' => out.push('+'),
                _ => out.push_str(&format!("%{byte:02X}")),
            }
        }
        out
    }
}

#[component]
pub fn TasksPage() -> impl IntoView {
    let params = use_query_map();
    let query = Memo::new(move |_| current_query(&params.read()));
    let page = Resource::new(move || query.get(), list_tasks);

    view! {
        <Title text="Tasks"/>
        <div class="flex flex-wrap items-baseline justify-between gap-4">
            <h1 class="text-2xl font-semibold tracking-tight">"Tasks"</h1>
            <p class="text-sm text-slate-500">"Every job StandMeet runs: mail, fetching, indexing."</p>
        </div>
        <Suspense fallback=|| view! { <p class="mt-6 text-sm text-slate-500">"Loading jobs…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(page) => view! { <TaskList page=page query=query.get_untracked()/> }.into_any(),
                    Err(error) => {
                        answer_bad_request();
                        view! {
                            <p role="alert" class="mt-6 rounded-md border border-rose-200 bg-rose-50 px-4 py-3 text-sm text-rose-900">
                                {server_message(&error)}
                            </p>
                        }
                        .into_any()
                    }
                }
            })}
        </Suspense>
    }
}

/// Marks the server's answer 400: the page explains what in its URL was wrong.
fn answer_bad_request() {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(axum::http::StatusCode::BAD_REQUEST);
    }
}

#[component]
fn TaskList(page: TaskPage, query: TaskQuery) -> impl IntoView {
    let TaskPage {
        rows,
        counts,
        older,
        kinds,
        queues,
    } = page;
    let rows: RwSignal<Vec<RwSignal<TaskRow>>> =
        RwSignal::new(rows.into_iter().map(RwSignal::new).collect());
    let counts = RwSignal::new(counts);
    let first_page = query.before.is_none();
    follow_jobs(rows, counts, query.clone(), first_page);

    let filters = query.clone();
    let newest = TaskQuery {
        before: None,
        ..query.clone()
    };
    let older_link = older.map(|before| {
        link(&TaskQuery {
            before: Some(before),
            ..query.clone()
        })
    });

    view! {
        <StateCounts counts=counts query=query.clone()/>
        <Filters query=filters kinds=kinds queues=queues/>
        <TaskTable rows=rows/>
        <nav aria-label="Pages" class="mt-4 flex justify-between text-sm">
            {(!first_page).then(|| view! {
                <a class="text-teal-700 hover:underline" href=link(&newest)>"← Newest"</a>
            })}
            <span></span>
            {older_link.map(|href| view! {
                <a class="text-teal-700 hover:underline" href=href data-testid="older-page">"Older →"</a>
            })}
        </nav>
    }
    // Erased here: the page's whole view as one concrete type is deep enough to
    // overflow rustc's query depth in the release wasm build (debug builds erase
    // component types anyway, so only `cargo leptos build --release` would show it).
    .into_any()
}

#[component]
fn TaskTable(rows: RwSignal<Vec<RwSignal<TaskRow>>>) -> impl IntoView {
    view! {
        <div class="mt-4 overflow-x-auto rounded-xl border border-slate-200 bg-white">
            <table class="min-w-full divide-y divide-slate-200 text-sm">
                <thead class="bg-slate-50 text-left text-xs font-medium uppercase tracking-wide text-slate-500">
                    <tr>
                        <th class="px-4 py-2">"ID"</th>
                        <th class="px-4 py-2">"Kind"</th>
                        <th class="px-4 py-2">"Queue"</th>
                        <th class="px-4 py-2">"State"</th>
                        <th class="px-4 py-2">"Attempt"</th>
                        <th class="px-4 py-2">"Created"</th>
                        <th class="px-4 py-2">"Finished or next run"</th>
                        <th class="px-4 py-2">"Last error"</th>
                    </tr>
                </thead>
                <tbody class="divide-y divide-slate-100">
                    <For each=move || rows.get() key=|row| row.get_untracked().id let:row>
                        <TaskRowView row=row/>
                    </For>
                </tbody>
            </table>
            <Show when=move || rows.with(Vec::is_empty)>
                <p class="px-4 py-8 text-center text-sm text-slate-500" data-testid="no-tasks">
                    "No jobs match these filters."
                </p>
            </Show>
        </div>
    }
    .into_any()
}

#[component]
fn TaskRowView(row: RwSignal<TaskRow>) -> impl IntoView {
    let id = row.get_untracked().id;
    view! {
        <tr data-testid="task-row" data-job-id=id.to_string() class="hover:bg-slate-50">
            <td class="px-4 py-2 font-mono">
                <a class="text-teal-700 hover:underline" href=format!("/admin/tasks/{id}")>{id}</a>
            </td>
            <td class="px-4 py-2 font-mono text-xs">{move || row.get().kind}</td>
            <td class="px-4 py-2">{move || row.get().queue}</td>
            <td class="px-4 py-2">
                {move || {
                    let current = row.get();
                    view! { <JobStateChip state=current.state title=current.last_error.unwrap_or_default()/> }
                }}
            </td>
            <td class="px-4 py-2 tabular-nums">{move || { let r = row.get(); format!("{} / {}", r.attempt, r.max_attempts) }}</td>
            <td class="px-4 py-2 whitespace-nowrap text-slate-600">{move || row.get().created}</td>
            <td class="px-4 py-2 whitespace-nowrap text-slate-600">
                {move || {
                    let r = row.get();
                    match (r.finalized, r.next_run) {
                        (Some(at), _) => at,
                        (None, Some(at)) => format!("next: {at}"),
                        (None, None) => "running now".to_string(),
                    }
                }}
            </td>
            <td class="max-w-xs truncate px-4 py-2 text-rose-800" title=move || { let r = row.get(); r.note.or(r.last_error).unwrap_or_default() }>
                {move || {
                    let r = row.get();
                    match r.note {
                        // Why it is not moving says more than the last error.
                        Some(note) => view! { <span data-testid="task-note" class="text-amber-800">{short(&note, 80)}</span> }.into_any(),
                        None => r.last_error.map(|error| short(&error, 80)).unwrap_or_default().into_any(),
                    }
                }}
            </td>
        </tr>
    }
    // Erased: a row of eight live cells is a deep type, and inside the table's `For`
    // it overflows rustc's query depth in release builds (see `TaskList`).
    .into_any()
}

/// At most `max` characters, with an ellipsis when cut.
fn short(text: &str, max: usize) -> String {
    let mut chars = text.chars();
    let cut: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        format!("{cut}…")
    } else {
        cut
    }
}

#[component]
fn StateCounts(counts: RwSignal<Vec<StateCount>>, query: TaskQuery) -> impl IntoView {
    let all = link(&TaskQuery {
        state: None,
        before: None,
        ..query.clone()
    });
    let selected = query.state.clone();
    view! {
        <nav aria-label="Job counts" class="mt-6 flex flex-wrap gap-2 text-sm">
            <a
                href=all
                class="rounded-full border border-slate-300 px-3 py-1 text-slate-700 hover:bg-slate-100"
                aria-current=selected.is_none().then_some("page")
            >
                "All"
            </a>
            {move || {
                counts
                    .get()
                    .into_iter()
                    .map(|count| {
                        let href = link(&TaskQuery {
                            state: Some(count.state.as_str().to_string()),
                            before: None,
                            ..query.clone()
                        });
                        let current = query.state.as_deref() == Some(count.state.as_str());
                        let number = if count.more { format!("{}+", count.count) } else { count.count.to_string() };
                        view! {
                            <a
                                href=href
                                data-testid="state-count"
                                data-state=count.state.as_str()
                                aria-current=current.then_some("page")
                                class=format!(
                                    "rounded-full border px-3 py-1 hover:bg-slate-100 {}",
                                    if current { "border-slate-900 bg-slate-900 text-white hover:bg-slate-800" } else { "border-slate-300 text-slate-700" },
                                )
                            >
                                {count.state.as_str()}
                                " "
                                <span class="tabular-nums opacity-80">{number}</span>
                            </a>
                        }
                    })
                    .collect_view()
            }}
        </nav>
    }
}

#[component]
fn Filters(query: TaskQuery, kinds: Vec<String>, queues: Vec<String>) -> impl IntoView {
    let option = |value: String, selected: bool| {
        let shown = value.clone();
        view! { <option value=value selected=selected>{shown}</option> }
    };
    let state_options = JobState::ALL
        .into_iter()
        .map(|state| {
            option(
                state.as_str().to_string(),
                query.state.as_deref() == Some(state.as_str()),
            )
        })
        .collect_view();
    let mut kinds = kinds;
    if let Some(kind) = &query.kind
        && !kinds.contains(kind)
    {
        kinds.push(kind.clone());
    }
    let kind_options = kinds
        .into_iter()
        .map(|kind| {
            let selected = query.kind.as_deref() == Some(kind.as_str());
            option(kind, selected)
        })
        .collect_view();
    let queue_options = queues
        .into_iter()
        .map(|queue| {
            let selected = query.queue.as_deref() == Some(queue.as_str());
            option(queue, selected)
        })
        .collect_view();
    let select_class = "mt-1 block rounded-md border border-slate-300 bg-white px-3 py-1.5 text-sm";
    view! {
        <form method="get" action="/admin/tasks" class="mt-4 flex flex-wrap items-end gap-4" aria-label="Filters">
            <div>
                <label for="filter-state" class=LABEL>"State"</label>
                <select id="filter-state" name="state" class=select_class>
                    <option value="">"any"</option>
                    {state_options}
                </select>
            </div>
            <div>
                <label for="filter-kind" class=LABEL>"Kind"</label>
                <select id="filter-kind" name="kind" class=select_class>
                    <option value="">"any"</option>
                    {kind_options}
                </select>
            </div>
            <div>
                <label for="filter-queue" class=LABEL>"Queue"</label>
                <select id="filter-queue" name="queue" class=select_class>
                    <option value="">"any"</option>
                    {queue_options}
                </select>
            </div>
            <button type="submit" class=PRIMARY_BUTTON>"Filter"</button>
            <a href="/admin/tasks" class="pb-2 text-sm text-slate-600 hover:underline">"Clear"</a>
        </form>
    }
}

/// Keeps the rows current while the page is open: the unfinished rows follow their jobs
/// live (a changed job's row is read again; while the stream is not open, ONE status
/// request a second for all of them), and every other second on the first page the
/// jobs newer than the newest row are put on top.
fn follow_jobs(
    rows: RwSignal<Vec<RwSignal<TaskRow>>>,
    counts: RwSignal<Vec<StateCount>>,
    query: TaskQuery,
    first_page: bool,
) {
    let unfinished = move || {
        rows.with_untracked(|rows| {
            rows.iter()
                .map(|row| row.get_untracked())
                .filter(|row| !row.state.is_terminal())
                .map(|row| row.id)
                .collect::<Vec<i64>>()
        })
    };
    use_live_rows(unfinished, move |fresh| update_rows(rows, &fresh));
    if !first_page {
        return;
    }
    let busy = StoredValue::new(false);
    use_polling(Duration::from_secs(2), move || {
        if busy.get_value() {
            return;
        }
        busy.set_value(true);
        let query = query.clone();
        leptos::task::spawn_local(async move {
            add_new_rows(rows, counts, query).await;
            busy.set_value(false);
        });
    });
}

/// Puts `fresh` rows in place of the ones shown with the same ids.
fn update_rows(rows: RwSignal<Vec<RwSignal<TaskRow>>>, fresh: &[TaskRow]) {
    rows.with_untracked(|rows| {
        for row in rows {
            let id = row.get_untracked().id;
            if let Some(current) = fresh.iter().find(|fresh| fresh.id == id)
                && *current != row.get_untracked()
            {
                row.set(current.clone());
            }
        }
    });
}

async fn add_new_rows(
    rows: RwSignal<Vec<RwSignal<TaskRow>>>,
    counts: RwSignal<Vec<StateCount>>,
    query: TaskQuery,
) {
    let newest = rows.with_untracked(|rows| rows.iter().map(|row| row.get_untracked().id).max());
    let Ok(page) = list_tasks(TaskQuery {
        after: newest,
        before: None,
        ..query
    })
    .await
    else {
        return;
    };
    counts.set(page.counts);
    if page.rows.is_empty() {
        return;
    }
    rows.update(|rows| {
        let mut fresh: Vec<RwSignal<TaskRow>> = page
            .rows
            .into_iter()
            .filter(|new| !rows.iter().any(|row| row.get_untracked().id == new.id))
            .map(RwSignal::new)
            .collect();
        fresh.append(rows);
        fresh.truncate(crate::api::tasks::PAGE_SIZE as usize);
        *rows = fresh;
    });
}
