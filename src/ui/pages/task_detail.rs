//! `/admin/tasks/<id>`: one job whole: its arguments and output, every failed attempt
//! with its time and error, its timeline, and Retry / Cancel where they apply. While it
//! is unfinished the page follows it every second.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::tasks::{CancelTask, RetryTask, TaskActionResult, TaskDetail, get_task};
use crate::model::{JobId, JobState};
use crate::ui::components::confirm::use_confirm;
use crate::ui::components::focus;
use crate::ui::components::form::SECONDARY_BUTTON;
use crate::ui::components::form::server_message;
use crate::ui::components::form::use_hydrated;
use crate::ui::components::live::use_live_jobs;
use crate::ui::components::params::use_id_param;
use crate::ui::components::status_chip::JobStateChip;
use crate::ui::components::toast::use_toasts;
use crate::ui::pages::not_found::NotFound;

#[component]
pub fn TaskDetailPage() -> impl IntoView {
    let id = use_id_param();
    let detail = Resource::new(
        move || id.get(),
        |id| async move {
            match id {
                Some(id) => get_task(JobId(id)).await,
                None => Ok(None),
            }
        },
    );

    let toasts = use_toasts();
    let retry = ServerAction::<RetryTask>::new();
    let cancel = ServerAction::<CancelTask>::new();
    let report = move |result: Option<Result<TaskActionResult, ServerFnError>>| match result {
        Some(Ok(TaskActionResult {
            done: true,
            message,
        })) => toasts.success(message),
        Some(Ok(TaskActionResult {
            done: false,
            message,
        })) => toasts.error(message),
        Some(Err(error)) => toasts.error(server_message(&error)),
        None => {}
    };
    // Each effect runs once at hydration too, before any action: the job is read
    // again only once an action answered (as the other pages guard their refetch).
    let after_action = move |result: Option<Result<TaskActionResult, ServerFnError>>| {
        let answered = result.is_some();
        report(result);
        if answered {
            detail.refetch();
        }
    };
    Effect::new(move |_| after_action(retry.value().get()));
    Effect::new(move |_| after_action(cancel.value().get()));

    // After Retry or Cancel (and each live change) the job is read again.
    Effect::new(move |_| {
        detail.with(|_| ());
        focus::restore_after_render();
    });

    // Follow an unfinished job live (polling while the stream is not open).
    use_live_jobs(
        move || {
            detail
                .get_untracked()
                .and_then(|answer| answer.ok().flatten())
                .filter(|job| !job.row.state.is_terminal())
                .map(|job| vec![job.row.id])
                .unwrap_or_default()
        },
        move |_| detail.refetch(),
        move || detail.refetch(),
    );

    let hydrated = use_hydrated();

    view! {
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading the job…"</p> }>
            {move || Suspend::new(async move {
                match detail.await {
                    Ok(Some(job)) => view! { <JobView job=job retry=retry cancel=cancel hydrated=hydrated/> }.into_any(),
                    Ok(None) => view! { <NotFound/> }.into_any(),
                    Err(error) => view! {
                        <p role="alert" class="rounded-md border border-rose-200 bg-rose-50 px-4 py-3 text-sm text-rose-900">
                            {server_message(&error)}
                        </p>
                    }
                    .into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn JobView(
    job: TaskDetail,
    retry: ServerAction<RetryTask>,
    cancel: ServerAction<CancelTask>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let confirm = use_confirm();
    let id = job.row.id;
    let state = job.row.state;
    let can_retry = matches!(
        state,
        JobState::Retryable | JobState::Discarded | JobState::Cancelled
    );
    let can_cancel = matches!(
        state,
        JobState::Available | JobState::Scheduled | JobState::Retryable | JobState::Running
    );
    let busy = move || !hydrated.get() || retry.pending().get() || cancel.pending().get();
    let timeline = [
        ("Created", Some(job.row.created_at.exact.clone())),
        ("Scheduled for", Some(job.scheduled.clone())),
        ("Last attempted", job.attempted.clone()),
        (
            "Finished",
            job.row
                .finished_or_next_at
                .as_ref()
                .filter(|_| job.row.state.is_terminal())
                .map(|at| at.exact.clone()),
        ),
    ];

    view! {
        <Title text=format!("Job {id}")/>
        <a href="/admin/tasks" class="text-sm text-teal-700 hover:underline">"← Tasks"</a>
        <div class="mt-2 flex flex-wrap items-center gap-3" data-testid="task-detail" data-job-id=id.to_string()>
            <h1 class="text-2xl font-semibold tracking-tight">{format!("Job {id}")}</h1>
            <JobStateChip state=state title=job.row.last_error.clone().unwrap_or_default()/>
            <span class="font-mono text-sm text-slate-600">{job.row.kind.clone()}</span>
            <div class="ml-auto flex gap-2">
                {can_retry.then(|| view! {
                    <button
                        type="button"
                        class=SECONDARY_BUTTON
                        disabled=busy
                        data-focus-key="job-retry"
                        // Retried, the job offers Cancel in Retry's place.
                        on:click=move |_| {
                            focus::remember_key("job-cancel");
                            retry.dispatch(RetryTask { id });
                        }
                    >
                        "Retry"
                    </button>
                })}
                {can_cancel.then(|| view! {
                    <button
                        type="button"
                        class=SECONDARY_BUTTON
                        disabled=busy
                        data-focus-key="job-cancel"
                        on:click=move |_| {
                            confirm.ask(
                                format!("Cancel job {id}? If it is running, its attempt is stopped; it will not run again unless you retry it."),
                                "Cancel job",
                                // Cancelled, the job offers Retry in Cancel's place.
                                move || {
                                    focus::remember_key("job-retry");
                                    cancel.dispatch(CancelTask { id });
                                },
                            );
                        }
                    >
                        "Cancel"
                    </button>
                })}
            </div>
        </div>
        {job.cancel_requested.then(|| view! {
            <p class="mt-2 text-sm text-amber-800">"An admin asked this job to stop; its attempt is being stopped."</p>
        })}
        {job.row.note.clone().map(|note| view! {
            <p class="mt-2 text-sm text-amber-800" data-testid="task-note">{note}</p>
        })}

        <dl class="mt-6 grid gap-x-8 gap-y-2 text-sm sm:grid-cols-4">
            <div><dt class="text-slate-500">"Queue"</dt><dd>{job.row.queue.clone()}</dd></div>
            <div><dt class="text-slate-500">"Attempt"</dt><dd data-testid="job-attempt">{format!("{} / {}", job.row.attempt, job.row.max_attempts)}</dd></div>
            <div><dt class="text-slate-500">"Priority"</dt><dd>{job.priority}</dd></div>
            <div><dt class="text-slate-500">"Worker"</dt><dd class="font-mono text-xs">{job.attempted_by.clone().unwrap_or_else(|| "—".into())}</dd></div>
            // The trace the job was inserted in (its attempts are spans of it), a link
            // to the trace viewer when STANDMEET_TRACE_URL names one.
            {job.trace_id.clone().map(|trace_id| {
                let shown = match job.trace_url.clone() {
                    Some(url) => view! {
                        <a class="text-indigo-700 underline hover:text-indigo-900 dark:text-indigo-300" href=url rel="noopener noreferrer" target="_blank">{trace_id}</a>
                    }.into_any(),
                    None => view! { <span>{trace_id}</span> }.into_any(),
                };
                view! {
                    <div class="sm:col-span-2">
                        <dt class="text-slate-500">"Trace"</dt>
                        <dd class="font-mono text-xs break-all" data-testid="job-trace-id">{shown}</dd>
                    </div>
                }
            })}
        </dl>

        <section class="mt-8">
            <h2 class="font-semibold">"Timeline"</h2>
            <ol class="mt-2 space-y-1 text-sm" data-testid="job-timeline">
                {timeline
                    .into_iter()
                    .filter_map(|(what, when)| when.map(|when| view! {
                        <li><span class="inline-block w-32 text-slate-500">{what}</span>{when}</li>
                    }))
                    .collect_view()}
            </ol>
        </section>

        <section class="mt-8">
            <h2 class="font-semibold">"Attempts that failed"</h2>
            {if job.attempts.is_empty() {
                view! { <p class="mt-2 text-sm text-slate-500">"None."</p> }.into_any()
            } else {
                view! {
                    <ol class="mt-2 space-y-2">
                        {job.attempts.into_iter().map(|attempt| view! {
                            <li data-testid="job-attempt-error" class="rounded-md border border-rose-100 bg-rose-50 px-3 py-2 text-sm">
                                <div class="text-xs text-rose-700">{format!("Attempt {} · {}", attempt.attempt, attempt.at)}</div>
                                <pre class="mt-1 whitespace-pre-wrap break-words font-mono text-rose-900">{attempt.error}</pre>
                            </li>
                        }).collect_view()}
                    </ol>
                }
                .into_any()
            }}
        </section>

        <div class="mt-8 grid gap-6 md:grid-cols-2">
            <section>
                <h2 class="font-semibold">"Arguments"</h2>
                <pre data-testid="job-args" class="mt-2 overflow-x-auto rounded-md border border-slate-200 bg-white p-3 font-mono text-xs">{job.args}</pre>
            </section>
            <section>
                <h2 class="font-semibold">"Output"</h2>
                <pre data-testid="job-output" class="mt-2 overflow-x-auto rounded-md border border-slate-200 bg-white p-3 font-mono text-xs">
                    {job.output.unwrap_or_else(|| "(none yet)".into())}
                </pre>
            </section>
        </div>
    }
}
