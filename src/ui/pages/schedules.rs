//! `/admin/schedules`: the periodic jobs. Each schedule with its expression and what it
//! means, its next run, its last run's job with a live chip, Enable / Disable and Run
//! now; below, a form to add one. Times are the owner's (`STANDMEET_TIMEZONE`).

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::schedules::{
    AddSchedule, RunScheduleNow, ScheduleView, SchedulesView, SetScheduleEnabled,
    schedules_overview,
};
use crate::model::JobId;
use crate::ui::components::focus;
use crate::ui::components::form::{
    INPUT, LABEL, PRIMARY_BUTTON, SECONDARY_BUTTON, server_message, use_hydrated,
};
use crate::ui::components::live::refetch_on_jobs;
use crate::ui::components::loaded::LoadError;
use crate::ui::components::status_chip::{JobStateChip, StatusChip, Tone};
use crate::ui::components::toast::use_toasts;

#[component]
pub fn SchedulesPage() -> impl IntoView {
    let toasts = use_toasts();
    let overview = Resource::new(|| (), |_| schedules_overview());
    let toggle = ServerAction::<SetScheduleEnabled>::new();
    let run_now = ServerAction::<RunScheduleNow>::new();
    let add = ServerAction::<AddSchedule>::new();
    let hydrated = use_hydrated();

    for action_value in [toggle.value(), run_now.value(), add.value()] {
        Effect::new(move |_| match action_value.get() {
            Some(Ok(message)) => {
                if message.starts_with("Already queued") {
                    toasts.info(message);
                } else {
                    toasts.success(message);
                }
                overview.refetch();
            }
            Some(Err(error)) => toasts.error(server_message(&error)),
            None => {}
        });
    }
    Effect::new(move |_| {
        overview.with(|_| ());
        focus::restore_after_render();
    });
    // The last runs' chips follow their jobs live until they finish.
    refetch_on_jobs(overview, |view| {
        view.schedules
            .iter()
            .filter_map(|s| s.last_run.as_ref())
            .filter(|run| !run.state.is_terminal())
            .map(|run| JobId(run.job_id))
            .collect()
    });

    view! {
        <Title text="Schedules"/>
        <div class="flex flex-wrap items-baseline justify-between gap-4">
            <h1 class="text-2xl font-semibold tracking-tight">"Schedules"</h1>
            <p class="text-sm text-slate-500">"Jobs that StandMeet queues by the clock, once per slot however many copies run."</p>
        </div>
        <Transition fallback=|| view! { <p class="mt-6 text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match overview.await {
                    Ok(view) => view! { <SchedulesBody view=view toggle=toggle run_now=run_now add=add hydrated=hydrated/> }.into_any(),
                    Err(error) => view! { <LoadError error=error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn SchedulesBody(
    view: SchedulesView,
    toggle: ServerAction<SetScheduleEnabled>,
    run_now: ServerAction<RunScheduleNow>,
    add: ServerAction<AddSchedule>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let SchedulesView {
        schedules,
        timezone,
        kinds,
    } = view;
    let none = schedules.is_empty();
    view! {
        <p class="mt-2 text-sm text-slate-600">"Times are in " <span data-testid="schedules-timezone" class="font-medium">{timezone}</span> "."</p>
        <section class="mt-4 rounded-xl border border-slate-200 bg-white" aria-labelledby="schedules-heading">
            <h2 id="schedules-heading" class="border-b border-slate-200 px-6 py-3 font-semibold">"Schedules"</h2>
            {if none {
                view! { <p class="px-6 py-4 text-sm text-slate-500">"No schedules yet: add one below."</p> }.into_any()
            } else {
                view! {
                    <ul class="divide-y divide-slate-100">
                        {schedules.into_iter().map(|schedule| view! { <ScheduleRow schedule=schedule toggle=toggle run_now=run_now hydrated=hydrated/> }).collect_view()}
                    </ul>
                }.into_any()
            }}
        </section>
        <AddScheduleForm add=add kinds=kinds hydrated=hydrated/>
    }
    .into_any()
}

#[component]
fn ScheduleRow(
    schedule: ScheduleView,
    toggle: ServerAction<SetScheduleEnabled>,
    run_now: ServerAction<RunScheduleNow>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let ScheduleView {
        name,
        cron,
        meaning,
        kind,
        args,
        queue,
        enabled,
        next_run,
        last_run,
    } = schedule;
    let toggle_name = name.clone();
    let run_name = name.clone();
    let toggle_label = if enabled { "Disable" } else { "Enable" };
    view! {
        <li data-testid="schedule-row" data-schedule=name.clone() data-enabled=enabled.to_string()
            class="flex flex-wrap items-start gap-x-6 gap-y-3 px-6 py-4 text-sm sm:items-center">
            <div class="min-w-0 basis-full sm:basis-56">
                <p class="font-mono font-medium">{name.clone()}</p>
                <p class="break-all text-xs text-slate-500">
                    <span class="font-mono">{kind}</span>" on "<span class="font-mono">{queue}</span>
                    {(args != "{}").then(|| view! { " with " <span class="font-mono">{args.clone()}</span> })}
                </p>
                <StatusChip label=if enabled { "enabled" } else { "disabled" } tone=if enabled { Tone::Success } else { Tone::Muted } test_id="schedule-state"/>
            </div>
            <dl class="grid min-w-0 flex-1 gap-x-6 gap-y-2 sm:grid-cols-3">
                <div>
                    <dt class="text-xs text-slate-500">"when"</dt>
                    <dd><code data-testid="schedule-cron" class="font-mono">{cron}</code></dd>
                    <dd data-testid="schedule-meaning" class="text-xs text-slate-600">{meaning}</dd>
                </div>
                <div>
                    <dt class="text-xs text-slate-500">"next run"</dt>
                    <dd data-testid="schedule-next-run">
                        {match next_run {
                            Some(next) => view! { <time datetime=next.rfc3339 class="tabular-nums">{next.local}</time> }.into_any(),
                            None => view! { <span class="text-slate-500">"— (disabled)"</span> }.into_any(),
                        }}
                    </dd>
                </div>
                <div>
                    <dt class="text-xs text-slate-500">"last run"</dt>
                    <dd data-testid="schedule-last-run" class="flex flex-wrap items-center gap-2">
                        {match last_run {
                            Some(run) => view! {
                                <a href=format!("/admin/tasks/{}", run.job_id) class="font-mono text-teal-800 hover:underline">{format!("#{}", run.job_id)}</a>
                                <JobStateChip state=run.state/>
                                <time datetime=run.at.rfc3339 class="text-xs text-slate-500 tabular-nums">{run.at.local}</time>
                            }.into_any(),
                            None => view! { <span class="text-slate-500">"never"</span> }.into_any(),
                        }}
                    </dd>
                </div>
            </dl>
            <div class="flex gap-2">
                <button type="button" class=SECONDARY_BUTTON disabled=move || !hydrated.get()
                        aria-label=format!("{toggle_label} {name}")
                        data-focus-key=format!("schedule-{name}-toggle")
                        on:click=move |_| { toggle.dispatch(SetScheduleEnabled { name: toggle_name.clone(), enabled: !enabled }); }>
                    {toggle_label}
                </button>
                <button type="button" class=SECONDARY_BUTTON disabled=move || !hydrated.get()
                        aria-label=format!("Run now: {name}")
                        data-focus-key=format!("schedule-{name}-run")
                        on:click=move |_| { run_now.dispatch(RunScheduleNow { name: run_name.clone() }); }>
                    "Run now"
                </button>
            </div>
        </li>
    }
}

#[component]
fn AddScheduleForm(
    add: ServerAction<AddSchedule>,
    kinds: Vec<crate::ops::schedules::KindOffer>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let cron = RwSignal::new(String::new());
    // Choosing a kind fills in an example of its arguments.
    let example_of = {
        let kinds = kinds.clone();
        move |kind: &str| {
            kinds
                .iter()
                .find(|offer| offer.kind == kind)
                .map_or_else(|| "{}".to_string(), |offer| offer.example_args.clone())
        }
    };
    let example_on_change = example_of.clone();
    let first = kinds.first().cloned();
    let kind = RwSignal::new(
        first
            .as_ref()
            .map(|offer| offer.kind.clone())
            .unwrap_or_default(),
    );
    let args = RwSignal::new(first.map_or_else(|| "{}".to_string(), |offer| offer.example_args));
    let queue = RwSignal::new(String::new());
    let refused = RwSignal::new(None::<String>);
    // Added: the form is cleared for the next one; refused: the reason stays under it.
    Effect::new(move |_| match add.value().get() {
        Some(Ok(_)) => {
            name.set(String::new());
            cron.set(String::new());
            args.set(example_of(&kind.get_untracked()));
            queue.set(String::new());
            refused.set(None);
        }
        Some(Err(error)) => refused.set(Some(server_message(&error))),
        None => {}
    });
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        add.dispatch(AddSchedule {
            name: name.get_untracked(),
            cron: cron.get_untracked(),
            kind: kind.get_untracked(),
            args: args.get_untracked(),
            queue: queue.get_untracked(),
        });
    };
    // Disabled until hydrated, as every control here: what was typed before would be
    // overwritten by the hydrated (empty) value.
    let off = move || !hydrated.get();
    view! {
        <section class="mt-6 rounded-xl border border-slate-200 bg-white p-6" aria-labelledby="add-schedule-heading">
            <h2 id="add-schedule-heading" class="font-semibold">"Add a schedule"</h2>
            <form on:submit=submit novalidate class="mt-4 grid gap-4 sm:grid-cols-2">
                <div>
                    <label for="schedule-name" class=LABEL>"Name"</label>
                    <input id="schedule-name" name="name" type="text" class=INPUT placeholder="nightly-report" maxlength="64"
                           disabled=off prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))/>
                </div>
                <div>
                    <label for="schedule-cron" class=LABEL>"Cron expression"</label>
                    <input id="schedule-cron" name="cron" type="text" class=format!("{INPUT} font-mono") placeholder="0 3 * * *"
                           aria-describedby="schedule-cron-help"
                           disabled=off prop:value=move || cron.get() on:input=move |ev| cron.set(event_target_value(&ev))/>
                    <p id="schedule-cron-help" class="mt-1 text-xs text-slate-500">"Minute hour day-of-month month day-of-week, or @hourly, @daily, @weekly."</p>
                </div>
                <div>
                    <label for="schedule-kind" class=LABEL>"Kind"</label>
                    <select id="schedule-kind" name="kind" class=INPUT disabled=off
                            aria-describedby="schedule-kind-help"
                            prop:value=move || kind.get() on:change=move |ev| {
                                let chosen = event_target_value(&ev);
                                args.set(example_on_change(&chosen));
                                kind.set(chosen);
                            }>
                        {kinds.iter().map(|offer| view! { <option value=offer.kind.clone()>{offer.kind.clone()}</option> }).collect_view()}
                    </select>
                    <p id="schedule-kind-help" class="mt-1 text-xs text-slate-500">
                        {move || kinds.iter().find(|offer| offer.kind == kind.get()).map(|offer| offer.what.clone())}
                    </p>
                </div>
                <div>
                    <label for="schedule-queue" class=LABEL>"Queue (optional)"</label>
                    <input id="schedule-queue" name="queue" type="text" class=INPUT placeholder="the kind's own" maxlength="64"
                           disabled=off prop:value=move || queue.get() on:input=move |ev| queue.set(event_target_value(&ev))/>
                </div>
                <div class="sm:col-span-2">
                    <label for="schedule-args" class=LABEL>"Args (a JSON object)"</label>
                    <textarea id="schedule-args" name="args" rows="2" class=format!("{INPUT} font-mono")
                              disabled=off prop:value=move || args.get() on:input=move |ev| args.set(event_target_value(&ev))></textarea>
                </div>
                {move || refused.get().map(|message| view! {
                    <p role="alert" data-testid="schedule-form-error" class="text-sm text-rose-800 sm:col-span-2">{message}</p>
                })}
                <div class="sm:col-span-2">
                    <button type="submit" class=PRIMARY_BUTTON disabled=move || !hydrated.get() || add.pending().get()>"Add schedule"</button>
                </div>
            </form>
        </section>
    }
}
