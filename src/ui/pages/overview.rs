//! `/admin`: the overview an admin lands on after signing in. Cards for what needs
//! attention (jobs that failed in the last hour, jobs waiting to retry, access requests
//! waiting for a decision, disabled webhooks, paused queues), each a link to the page
//! that shows them filtered; then each queue's backlog and the next bookings. The
//! figures refresh every two seconds while the page is open.

use std::time::Duration;

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::overview::{NextBooking, Overview, QueueWaiting, admin_overview};
use crate::ui::components::loaded::Loaded;
use crate::ui::components::poll::use_polling;
use crate::ui::components::status_chip::{StatusChip, Tone};

#[component]
pub fn OverviewPage() -> impl IntoView {
    let overview = Resource::new(|| (), |_| admin_overview());
    use_polling(Duration::from_secs(2), move || overview.refetch());
    view! {
        <Title text="Overview"/>
        <h1 class="text-2xl font-semibold tracking-tight">"Overview"</h1>
        <p class="mt-2 text-sm text-slate-600">"What needs your attention. Each card opens the page that shows it."</p>
        <Loaded resource=overview show=move |overview| view! { <OverviewBody overview=overview/> }/>
    }
}

#[component]
fn OverviewBody(overview: Overview) -> impl IntoView {
    let Overview {
        failed_last_hour,
        retrying,
        requests_waiting,
        oldest_request,
        disabled_webhooks,
        paused_queues,
        queues,
        next_bookings,
        owner_timezone,
    } = overview;
    let webhooks_detail = match disabled_webhooks.as_slice() {
        [] => "Every endpoint receives deliveries.".to_string(),
        [only] => only
            .reason
            .clone()
            .unwrap_or_else(|| format!("{} receives nothing.", only.url)),
        more => format!("{} endpoints receive nothing.", more.len()),
    };
    let webhooks_href = match disabled_webhooks.as_slice() {
        [only] => format!("/admin/webhooks/{}", only.id),
        _ => "/admin/webhooks".to_string(),
    };
    let paused_detail = if paused_queues.is_empty() {
        "Every queue runs.".to_string()
    } else {
        format!("Paused: {}.", paused_queues.join(", "))
    };
    view! {
        <ul class="mt-6 grid gap-4 sm:grid-cols-2 xl:grid-cols-3" aria-label="Needs attention">
            <Card card="failed" count=failed_last_hour href="/admin/tasks?state=discarded".into()
                  title="Failed in the last hour"
                  detail=if failed_last_hour == 0 { "No job ran out of attempts.".into() } else { "Discarded: out of attempts, or refused for good.".into() }/>
            <Card card="retrying" count=retrying href="/admin/tasks?state=retryable".into()
                  title="Waiting to retry"
                  detail=if retrying == 0 { "No job is waiting for another attempt.".into() } else { "Failed once or more; another attempt is due.".into() }/>
            <Card card="requests" count=requests_waiting href="/admin/access-requests?status=pending".into()
                  title="Access requests waiting"
                  detail=match oldest_request { Some(age) => format!("The oldest has waited {age}."), None => "Nobody is waiting for a decision.".into() }/>
            <Card card="webhooks" count=disabled_webhooks.len() as i64 href=webhooks_href
                  title="Disabled webhooks" detail=webhooks_detail/>
            <Card card="paused" count=paused_queues.len() as i64 href="/admin/queues".into()
                  title="Paused queues" detail=paused_detail/>
        </ul>

        <div class="mt-10 grid gap-8 lg:grid-cols-2">
            <section aria-labelledby="overview-queues">
                <h2 id="overview-queues" class="text-lg font-semibold">"Queues"</h2>
                <p class="mt-1 text-sm text-slate-600">"Jobs due now in each queue, and how long the oldest has waited."</p>
                <ul class="mt-3 divide-y divide-slate-100 rounded-xl border border-slate-200 bg-white">
                    {queues.into_iter().map(|queue| view! { <QueueLine queue=queue/> }).collect_view()}
                </ul>
            </section>
            <section aria-labelledby="overview-bookings">
                <h2 id="overview-bookings" class="text-lg font-semibold">
                    <a href="/admin/bookings" class="hover:underline focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600">"Next bookings"</a>
                </h2>
                <p class="mt-1 text-sm text-slate-600">{format!("In the owner's time zone, {owner_timezone}.")}</p>
                {if next_bookings.is_empty() {
                    view! { <p data-testid="overview-no-bookings" class="mt-3 rounded-xl border border-slate-200 bg-white px-5 py-4 text-sm text-slate-600">"No meeting is booked."</p> }.into_any()
                } else {
                    view! {
                        <ul class="mt-3 divide-y divide-slate-100 rounded-xl border border-slate-200 bg-white">
                            {next_bookings.into_iter().map(|booking| view! { <BookingLine booking=booking/> }).collect_view()}
                        </ul>
                    }.into_any()
                }}
            </section>
        </div>
    }
}

/// One figure that may need attention, as a link to the page that shows it.
#[component]
fn Card(
    card: &'static str,
    count: i64,
    href: String,
    title: &'static str,
    detail: String,
) -> impl IntoView {
    let attention = count > 0;
    let figure = if attention {
        "mt-2 text-3xl font-semibold tabular-nums text-rose-800"
    } else {
        "mt-2 text-3xl font-semibold tabular-nums text-slate-900"
    };
    view! {
        <li>
            <a href=href data-testid="overview-card" data-card=card data-count=count.to_string()
               data-attention=attention.to_string()
               class="block h-full rounded-xl border border-slate-200 bg-white p-5 hover:border-slate-400 focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600">
                <span class="block text-sm font-medium text-slate-600">{title}</span>
                <span class=figure>{count}</span>
                <span class="mt-1 block text-sm text-slate-600">{detail}</span>
            </a>
        </li>
    }
}

#[component]
fn QueueLine(queue: QueueWaiting) -> impl IntoView {
    let QueueWaiting {
        name,
        paused,
        available,
        oldest_available,
        behind,
    } = queue;
    let (label, tone) = match (paused, behind) {
        (true, _) => ("paused", Tone::Warning),
        (false, true) => ("behind", Tone::Danger),
        (false, false) => ("keeping up", Tone::Success),
    };
    let href = format!("/admin/tasks?state=available&queue={name}");
    let shown = name.clone();
    view! {
        <li data-testid="overview-queue" data-queue=name.clone() data-available=available.to_string()
            data-behind=behind.to_string()>
            <a href=href class="flex flex-wrap items-center gap-x-4 gap-y-1 px-5 py-3 text-sm hover:bg-slate-50 focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600">
                <span class="min-w-24 font-mono font-medium">{shown}</span>
                <StatusChip label=label tone=tone test_id="overview-queue-state"/>
                <span class="tabular-nums text-slate-600">{format!("{available} due")}</span>
                <span class="ml-auto tabular-nums text-slate-600">
                    {match oldest_available { Some(age) => format!("oldest waited {age}"), None => "none waiting".into() }}
                </span>
            </a>
        </li>
    }
}

#[component]
fn BookingLine(booking: NextBooking) -> impl IntoView {
    view! {
        <li data-testid="overview-booking" data-booking-id=booking.id.to_string() class="px-5 py-3 text-sm">
            <p class="font-medium">{booking.when}</p>
            <p class="text-slate-600">{name_and_topic(&booking.name, &booking.topic)}</p>
        </li>
    }
}

/// "Ada — Pairing on the parser", or the name alone when the visitor gave no topic.
fn name_and_topic(name: &str, topic: &str) -> String {
    if topic.trim().is_empty() {
        name.to_string()
    } else {
        format!("{name} — {topic}")
    }
}

#[cfg(test)]
mod tests {
    use super::name_and_topic;

    #[test]
    fn a_booking_without_a_topic_shows_the_name_alone() {
        assert_eq!(name_and_topic("Ada", ""), "Ada");
        assert_eq!(name_and_topic("Ada", "  "), "Ada");
        assert_eq!(name_and_topic("Ada", "Parser"), "Ada — Parser");
    }
}
