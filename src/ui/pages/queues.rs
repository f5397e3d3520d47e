//! `/admin/queues`: each job queue with its jobs by state, how many finished in the last
//! five minutes, how long its oldest available job has waited, and Pause / Resume. The
//! figures refresh every two seconds while the page is open.

use std::time::Duration;

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::queues::{PauseQueue, QueueView, ResumeQueue, queues_overview};
use crate::ui::components::focus;
use crate::ui::components::form::{SECONDARY_BUTTON, server_message, use_hydrated};
use crate::ui::components::loaded::Loaded;
use crate::ui::components::poll::use_polling;
use crate::ui::components::status_chip::{StatusChip, Tone};
use crate::ui::components::toast::use_toasts;

#[component]
pub fn QueuesPage() -> impl IntoView {
    let toasts = use_toasts();
    let overview = Resource::new(|| (), |_| queues_overview());
    let pause = ServerAction::<PauseQueue>::new();
    let resume = ServerAction::<ResumeQueue>::new();
    let hydrated = use_hydrated();
    // Fresh figures every two seconds; the keyboard keeps its place across them.
    use_polling(Duration::from_secs(2), move || overview.refetch());
    Effect::new(move |_| {
        overview.with(|_| ());
        focus::restore_after_render();
    });

    for action_value in [pause.value(), resume.value()] {
        Effect::new(move |_| match action_value.get() {
            Some(Ok(message)) => {
                toasts.success(message);
                overview.refetch();
            }
            Some(Err(error)) => toasts.error(server_message(&error)),
            None => {}
        });
    }

    view! {
        <Title text="Queues"/>
        <div class="flex flex-wrap items-baseline justify-between gap-4">
            <h1 class="text-2xl font-semibold tracking-tight">"Queues"</h1>
            <p class="text-sm text-slate-500">"A paused queue's jobs wait in every StandMeet process until you resume it."</p>
        </div>
        <Loaded resource=overview show=move |queues| view! { <ul class="mt-6 divide-y divide-slate-100 rounded-xl border border-slate-200 bg-white">
                            {queues.into_iter().map(|queue| view! { <QueueRow queue=queue pause=pause resume=resume hydrated=hydrated/> }).collect_view()}
                        </ul> }/>
    }
}

#[component]
fn QueueRow(
    queue: QueueView,
    pause: ServerAction<PauseQueue>,
    resume: ServerAction<ResumeQueue>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let QueueView {
        name,
        paused,
        counts,
        finished_last_5m,
        oldest_available,
    } = queue;
    let button_name = name.clone();
    let label = if paused { "Resume" } else { "Pause" };
    view! {
        <li data-testid="queue-row" data-queue=name.clone() data-paused=paused.to_string() class="flex flex-wrap items-start gap-x-6 gap-y-3 px-6 py-4 text-sm sm:items-center">
            <div class="w-full sm:w-auto sm:min-w-32">
                <p class="font-mono font-medium">{name.clone()}</p>
                <StatusChip label=if paused { "paused" } else { "running" } tone=if paused { Tone::Warning } else { Tone::Success } test_id="queue-state"/>
            </div>
            <dl class="flex flex-1 flex-wrap gap-x-5 gap-y-2">
                {counts.into_iter().map(|(state, count)| view! {
                    <div data-testid="queue-count" data-state=state.clone() data-count=count.to_string()>
                        <dt class="text-xs text-slate-500">{state.clone()}</dt>
                        <dd class="font-medium tabular-nums">{count}</dd>
                    </div>
                }).collect_view()}
                <div>
                    <dt class="text-xs text-slate-500">"finished, last 5 min"</dt>
                    <dd data-testid="queue-finished-5m" class="font-medium tabular-nums">{finished_last_5m}</dd>
                </div>
                <div>
                    <dt class="text-xs text-slate-500">"oldest waiting"</dt>
                    <dd data-testid="queue-oldest-available" class="font-medium tabular-nums">{oldest_available.unwrap_or_else(|| "—".into())}</dd>
                </div>
            </dl>
            <button type="button" class=SECONDARY_BUTTON disabled=move || !hydrated.get()
                    aria-label=format!("{label} queue {name}")
                    data-focus-key=format!("queue-{name}")
                    on:click=move |_| {
                        let queue = button_name.clone();
                        if paused {
                            resume.dispatch(ResumeQueue { queue });
                        } else {
                            pause.dispatch(PauseQueue { queue });
                        }
                    }>
                {label}
            </button>
        </li>
    }
}
