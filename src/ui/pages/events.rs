//! `/admin/events`: what happened, newest first, filtered by type (`?type=`), a page at
//! a time (`?before=<id>`). Each event shows its data as the webhooks deliver it.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::events::{EventView, EventsView, events_page};
use crate::ui::components::form::{INPUT, LABEL, SECONDARY_BUTTON};
use crate::ui::components::loaded::Loaded;

#[derive(Clone, Debug, PartialEq, Eq)]
struct EventsQuery {
    event_type: Option<String>,
    before: Option<i64>,
}

fn link(query: &EventsQuery) -> String {
    let mut parts = Vec::new();
    if let Some(event_type) = &query.event_type {
        parts.push(format!("type={event_type}"));
    }
    if let Some(before) = query.before {
        parts.push(format!("before={before}"));
    }
    if parts.is_empty() {
        "/admin/events".into()
    } else {
        format!("/admin/events?{}", parts.join("&"))
    }
}

#[component]
pub fn EventsPage() -> impl IntoView {
    let params = use_query_map();
    let query = Memo::new(move |_| {
        let params = params.read();
        EventsQuery {
            event_type: params.get("type").filter(|t| !t.trim().is_empty()),
            before: params.get("before").and_then(|b| b.parse().ok()),
        }
    });
    let page = Resource::new(
        move || query.get(),
        |query| events_page(query.event_type, query.before),
    );

    view! {
        <Title text="Events"/>
        <div class="flex flex-wrap items-baseline justify-between gap-4">
            <h1 class="text-2xl font-semibold tracking-tight">"Events"</h1>
            <p class="text-sm text-slate-500">"What happened, as webhooks and events.list tell it."</p>
        </div>
        <Loaded resource=page loading="Loading events…" show=move |view| view! { <EventList view=view query=query.get_untracked()/> }/>
    }
}

#[component]
fn EventList(view: EventsView, query: EventsQuery) -> impl IntoView {
    let EventsView {
        events,
        types,
        older_than,
    } = view;
    let chosen = query.event_type.clone().unwrap_or_default();
    let first_page = query.before.is_none();
    let newest = link(&EventsQuery {
        before: None,
        ..query.clone()
    });
    let older = older_than.map(|before| {
        link(&EventsQuery {
            before: Some(before),
            ..query.clone()
        })
    });
    let empty = events.is_empty();
    view! {
        <form method="get" action="/admin/events" class="mt-6 flex flex-wrap items-end gap-3">
            <div>
                <label for="event-type" class=LABEL>"Type"</label>
                <select id="event-type" name="type" class=INPUT>
                    <option value="" selected=chosen.is_empty()>"All types"</option>
                    {types.into_iter().map(|name| {
                        let selected = name == chosen;
                        view! { <option value=name.clone() selected=selected>{name.clone()}</option> }
                    }).collect_view()}
                </select>
            </div>
            <button type="submit" class=SECONDARY_BUTTON>"Filter"</button>
        </form>
        {if empty {
            let words = if chosen.is_empty() {
                "No events yet.".to_string()
            } else if first_page {
                format!("No {chosen} events yet.")
            } else {
                format!("No older {chosen} events.")
            };
            view! { <p class="mt-6 text-sm text-slate-500">{words}</p> }.into_any()
        } else {
            view! {
                <ul class="mt-4 divide-y divide-slate-100 rounded-xl border border-slate-200 bg-white">
                    {events.into_iter().map(|event| view! { <EventRow event=event/> }).collect_view()}
                </ul>
            }.into_any()
        }}
        <nav aria-label="Pages" class="mt-4 flex justify-between text-sm">
            {(!first_page).then(|| view! { <a class="text-teal-700 hover:underline" href=newest>"← Newest"</a> })}
            <span></span>
            {older.map(|href| view! { <a class="text-teal-700 hover:underline" href=href data-testid="older-page">"Older →"</a> })}
        </nav>
    }
    .into_any()
}

#[component]
fn EventRow(event: EventView) -> impl IntoView {
    view! {
        <li data-testid="event-row" data-event-id=event.id.to_string() data-event-type=event.event_type.clone() class="px-6 py-3 text-sm">
            <details>
                <summary class="flex cursor-pointer flex-wrap items-center gap-3">
                    <span class="font-mono text-xs text-slate-500">{format!("#{}", event.id)}</span>
                    <span data-testid="event-type" class="font-medium">{event.event_type.clone()}</span>
                    {event.subject_id.map(|id| view! { <span class="text-xs text-slate-500">{format!("subject {id}")}</span> })}
                    <span class="ml-auto whitespace-nowrap text-xs text-slate-500">{event.occurred_at.clone()}</span>
                </summary>
                <pre data-testid="event-data" class="mt-2 overflow-x-auto rounded bg-slate-50 p-3 text-xs">{event.data.clone()}</pre>
            </details>
        </li>
    }
}
