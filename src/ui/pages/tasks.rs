//! `/admin/tasks`: every job, newest first, with its state, attempts and last error;
//! counts by state; filters by state, kind and queue kept in the URL (so a shared link
//! shows the same view, rendered on the server); keyset paging. Chips of unfinished
//! rows follow their jobs by polling (one request for all of them), and new jobs appear
//! at the top of the first page.

use std::time::Duration;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::tasks::{
    CancelSelected, DeleteSelected, FinishedMinute, Moment, RetrySelected, StateCount, TaskPage,
    TaskQuery, TaskRow, list_tasks,
};
use crate::model::{JobId, JobState};
use crate::ui::components::confirm::use_confirm;
use crate::ui::components::focus;
use crate::ui::components::form::server_message;
use crate::ui::components::form::{LABEL, PRIMARY_BUTTON, SECONDARY_BUTTON};
use crate::ui::components::live::use_live_rows;
use crate::ui::components::poll::use_polling;
use crate::ui::components::status_chip::JobStateChip;
use crate::ui::components::table::{BODY, CELL, HEAD, HEAD_CELL, ROW, TABLE, TABLE_CARD};
use crate::ui::components::toast::use_toasts;

/// The query of this page as it is in the URL.
fn current_query(query: &leptos_router::params::ParamsMap) -> TaskQuery {
    let text = |name: &str| query.get(name).filter(|value| !value.trim().is_empty());
    TaskQuery {
        state: text("state"),
        kind: text("kind"),
        queue: text("queue"),
        q: text("q"),
        before: query
            .get("before")
            .and_then(|value| value.parse().ok())
            .map(JobId),
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
        ("q", query.q.clone()),
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
    // After a bulk action the list is read again; the keyboard keeps its place.
    Effect::new(move |_| {
        page.with(|_| ());
        focus::restore_after_render();
    });

    view! {
        <Title text="Tasks"/>
        <div class="flex flex-wrap items-baseline justify-between gap-4">
            <h1 class="text-2xl font-semibold tracking-tight">"Tasks"</h1>
            <p class="text-sm text-slate-500">"Every job StandMeet runs: mail, fetching, indexing."</p>
        </div>
        <Transition fallback=|| view! { <p class="mt-6 text-sm text-slate-500">"Loading jobs…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(listed) => view! { <TaskList page=listed query=query.get_untracked() refresh=Callback::new(move |()| page.refetch())/> }.into_any(),
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
        </Transition>
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
fn TaskList(page: TaskPage, query: TaskQuery, refresh: Callback<()>) -> impl IntoView {
    let TaskPage {
        rows,
        throughput,
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

    let selected = RwSignal::new(Vec::<JobId>::new());
    view! {
        <ThroughputChart minutes=throughput/>
        <StateCounts counts=counts query=query.clone()/>
        <Filters query=filters kinds=kinds queues=queues/>
        <BulkActions selected=selected refresh=refresh/>
        <TaskTable rows=rows selected=selected/>
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
    // component types anyway, so only `scripts/build --release` would show it).
    .into_any()
}

/// Jobs finished per minute over the last hour, by outcome: stacked bars, drawn on the
/// server as SVG (no script needed), each with its figures as a tooltip.
#[component]
fn ThroughputChart(minutes: Vec<FinishedMinute>) -> impl IntoView {
    const WIDTH: f64 = 600.0;
    const HEIGHT: f64 = 80.0;
    let most = minutes
        .iter()
        .map(FinishedMinute::total)
        .max()
        .unwrap_or(0)
        .max(1);
    let sum = |pick: fn(&FinishedMinute) -> i64| minutes.iter().map(pick).sum::<i64>();
    let (completed, discarded, cancelled) = (
        sum(|m| m.completed),
        sum(|m| m.discarded),
        sum(|m| m.cancelled),
    );
    let summary = format!(
        "Jobs finished in the last hour: {completed} completed, {discarded} discarded, {cancelled} cancelled; at most {most} in a minute."
    );
    let label = summary.clone();
    let slot = WIDTH / minutes.len().max(1) as f64;
    let bars = minutes
        .iter()
        .enumerate()
        .map(|(n, minute)| {
            let x = n as f64 * slot;
            let mut top = HEIGHT;
            let mut segment = |count: i64, class: &'static str| {
                let height = HEIGHT * count as f64 / most as f64;
                top -= height;
                (count > 0).then(|| {
                    view! { <rect x=format!("{:.1}", x + 1.0) y=format!("{top:.1}") width=format!("{:.1}", slot - 2.0) height=format!("{height:.1}") class=class/> }
                })
            };
            let parts = (
                segment(minute.completed, "fill-emerald-500"),
                segment(minute.discarded, "fill-rose-500"),
                segment(minute.cancelled, "fill-slate-400"),
            );
            let tip = format!(
                "{}: {} completed, {} discarded, {} cancelled",
                minute.label, minute.completed, minute.discarded, minute.cancelled
            );
            view! {
                <g data-testid="throughput-minute" data-total=minute.total().to_string()>
                    <title>{tip}</title>
                    <rect x=format!("{x:.1}") y="0" width=format!("{slot:.1}") height=format!("{HEIGHT}") class="fill-transparent"/>
                    {parts.0}{parts.1}{parts.2}
                </g>
            }
        })
        .collect_view();
    view! {
        <figure class="mt-6 rounded-xl border border-slate-200 bg-white px-4 py-3">
            <figcaption class="flex flex-wrap items-baseline justify-between gap-2 text-xs text-slate-500">
                <span class="font-medium text-slate-700">"Finished per minute, last hour"</span>
                <span>
                    <span class="text-emerald-700">{format!("{completed} completed")}</span>" · "
                    <span class="text-rose-700">{format!("{discarded} discarded")}</span>" · "
                    <span>{format!("{cancelled} cancelled")}</span>
                </span>
            </figcaption>
            <svg data-testid="throughput-chart" role="img" aria-label=label
                 viewBox=format!("0 0 {WIDTH} {HEIGHT}") preserveAspectRatio="none" class="mt-2 h-20 w-full">
                <title>{summary}</title>
                {bars}
            </svg>
            <div class="flex justify-between text-xs text-slate-600"><span>"an hour ago"</span><span>"now"</span></div>
        </figure>
    }
    .into_any()
}

/// "Retry selected", "Cancel selected", "Delete selected": each asks first, runs in one
/// transaction, and says in a toast how many jobs changed and why the others did not.
#[component]
fn BulkActions(selected: RwSignal<Vec<JobId>>, refresh: Callback<()>) -> impl IntoView {
    let toasts = use_toasts();
    let retry = ServerAction::<RetrySelected>::new();
    let cancel = ServerAction::<CancelSelected>::new();
    let delete = ServerAction::<DeleteSelected>::new();
    for value in [retry.value(), cancel.value(), delete.value()] {
        Effect::new(move |_| match value.get() {
            Some(Ok(result)) => {
                if result.done {
                    toasts.success(result.message);
                } else {
                    toasts.error(result.message);
                }
                selected.set(Vec::new());
                refresh.run(());
            }
            Some(Err(error)) => toasts.error(server_message(&error)),
            None => {}
        });
    }
    let none = move || selected.with(Vec::is_empty);
    let count_words = move || {
        let n = selected.with(Vec::len);
        format!("{n} selected job{}", if n == 1 { "" } else { "s" })
    };
    view! {
        <div class="mt-4 flex flex-wrap items-center gap-2 text-sm" data-testid="bulk-actions">
            <span class="text-slate-500" data-testid="selected-count">{move || if none() { "Select jobs to act on several at once.".to_string() } else { format!("{}:", count_words()) }}</span>
            <BulkButton label="Retry selected" selected=selected
                        what="Those that a retry applies to (retryable, discarded, cancelled) run again now."
                        run=Callback::new(move |ids| { retry.dispatch(RetrySelected { ids }); })/>
            <BulkButton label="Cancel selected" selected=selected
                        what="Those not started are cancelled at once; running ones are asked to stop."
                        run=Callback::new(move |ids| { cancel.dispatch(CancelSelected { ids }); })/>
            <BulkButton label="Delete selected" selected=selected
                        what="Only finished jobs are deleted; their history goes with them."
                        run=Callback::new(move |ids| { delete.dispatch(DeleteSelected { ids }); })/>
        </div>
    }
}

/// One bulk action's button: asks "<Verb> 3 selected jobs? <what>", then `run`s with the
/// selected ids; the keyboard then lands on "Select all" (nothing is selected any more).
#[component]
fn BulkButton(
    label: &'static str,
    what: &'static str,
    selected: RwSignal<Vec<JobId>>,
    run: Callback<Vec<JobId>>,
) -> impl IntoView {
    let confirm = use_confirm();
    let verb = label.trim_end_matches(" selected");
    view! {
        <button type="button" class=SECONDARY_BUTTON disabled=move || selected.with(Vec::is_empty)
                on:click=move |_| {
                    let n = selected.with(Vec::len);
                    confirm.ask(
                        format!("{verb} {n} selected job{}? {what}", if n == 1 { "" } else { "s" }),
                        label,
                        move || {
                            focus::remember_key("task-select-all");
                            run.run(selected.get_untracked());
                        },
                    );
                }>
            {label}
        </button>
    }
}

#[component]
fn TaskTable(
    rows: RwSignal<Vec<RwSignal<TaskRow>>>,
    selected: RwSignal<Vec<JobId>>,
) -> impl IntoView {
    let all_ids = move || {
        rows.with(|rows| {
            rows.iter()
                .map(|row| row.get_untracked().id)
                .collect::<Vec<_>>()
        })
    };
    let all_selected = move || {
        let ids = all_ids();
        !ids.is_empty() && selected.with(|chosen| ids.iter().all(|id| chosen.contains(id)))
    };
    view! {
        <div class=TABLE_CARD>
            <table class=TABLE>
                <thead class=HEAD>
                    <tr>
                        <th class=HEAD_CELL>
                            <input type="checkbox" aria-label="Select all" data-testid="task-select-all" data-focus-key="task-select-all"
                                   class="h-4 w-4 rounded border-slate-300 focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600"
                                   prop:checked=all_selected
                                   on:change=move |_| {
                                       if all_selected() { selected.set(Vec::new()) } else { selected.set(all_ids()) }
                                   }/>
                        </th>
                        <th class=HEAD_CELL>"ID"</th>
                        <th class=HEAD_CELL>"Kind"</th>
                        <th class=HEAD_CELL>"Queue"</th>
                        <th class=HEAD_CELL>"State"</th>
                        <th class=HEAD_CELL>"Attempt"</th>
                        <th class=HEAD_CELL>"Created"</th>
                        <th class=HEAD_CELL>"Finished or next run"</th>
                        <th class=HEAD_CELL>"Last error"</th>
                    </tr>
                </thead>
                <tbody class=BODY>
                    <For each=move || rows.get() key=|row| row.get_untracked().id let:row>
                        <TaskRowView row=row selected=selected/>
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
fn TaskRowView(row: RwSignal<TaskRow>, selected: RwSignal<Vec<JobId>>) -> impl IntoView {
    let id = row.get_untracked().id;
    let is_selected = move || selected.with(|chosen| chosen.contains(&id));
    view! {
        <tr data-testid="task-row" data-job-id=id.to_string() class=format!("{ROW} hover:bg-slate-50")>
            <td class=CELL data-label="Select">
                <input type="checkbox" aria-label=format!("Select job {id}") data-testid="task-select"
                       class="h-4 w-4 rounded border-slate-300 focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600"
                       prop:checked=is_selected
                       on:change=move |_| selected.update(|chosen| {
                           if let Some(at) = chosen.iter().position(|chosen| *chosen == id) {
                               chosen.remove(at);
                           } else {
                               chosen.push(id);
                           }
                       })/>
            </td>
            <td class=format!("{CELL} font-mono") data-label="ID">
                <a class="text-teal-700 hover:underline" href=format!("/admin/tasks/{id}")>{id.0}</a>
            </td>
            <td class=format!("{CELL} min-w-0 break-all font-mono text-xs") data-label="Kind">{move || row.get().kind}</td>
            // On a phone the card keeps what tells jobs apart; the queue and the creation
            // time are on the job's page.
            <td class=format!("{CELL} max-md:hidden") data-label="Queue">{move || row.get().queue}</td>
            <td class=CELL data-label="State">
                {move || {
                    let current = row.get();
                    view! { <JobStateChip state=current.state title=current.last_error.unwrap_or_default()/> }
                }}
            </td>
            <td class=format!("{CELL} tabular-nums") data-label="Attempt">{move || { let r = row.get(); format!("{} / {}", r.attempt, r.max_attempts) }}</td>
            <td class=format!("{CELL} max-md:hidden md:whitespace-nowrap text-slate-600") data-label="Created">{move || view! { <When moment=row.get().created_at/> }}</td>
            <td class=format!("{CELL} md:whitespace-nowrap text-slate-600") data-label="Finished">
                {move || {
                    let r = row.get();
                    match (r.state.is_terminal(), r.finished_or_next_at) {
                        (true, Some(at)) => view! { <When moment=at/> }.into_any(),
                        (false, Some(at)) => view! { "next: " <When moment=at/> }.into_any(),
                        (_, None) => "running now".into_any(),
                    }
                }}
            </td>
            <td class=move || {
                    // An empty error line says nothing on a phone.
                    let r = row.get();
                    let none = if r.note.is_none() && r.last_error.is_none() { "max-md:hidden" } else { "" };
                    format!("{CELL} {none} md:max-w-xs md:truncate break-words text-rose-800")
                }
                data-label="Error" title=move || { let r = row.get(); r.note.or(r.last_error).unwrap_or_default() }>
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

/// A moment as relative words in a `<time>`, with the exact time as its title.
#[component]
fn When(moment: Moment) -> impl IntoView {
    view! { <time datetime=moment.iso title=moment.exact>{moment.relative}</time> }
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
            <div class="min-w-56 flex-1">
                <label for="filter-q" class=LABEL>"Search"</label>
                <input id="filter-q" name="q" type="search" data-testid="task-search"
                       placeholder="a job id, or {\"request_id\": 7}"
                       class="mt-1 block w-full rounded-md border border-slate-300 bg-white px-3 py-1.5 font-mono text-sm"
                       value=query.q.clone().unwrap_or_default()/>
            </div>
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
                .collect::<Vec<JobId>>()
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
