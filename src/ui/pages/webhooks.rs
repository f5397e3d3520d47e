//! `/admin/webhooks`: the endpoints that hear about events (add one and see its secret
//! once; send a test, disable / enable, delete), and `/admin/webhooks/<id>`: one
//! endpoint's deliveries with their chips (`sending` → `delivered` or `failed`), the
//! answer each got, and "Redeliver".
//!
//! "Send test" answers with a toast when the test is queued and another when it was
//! delivered or failed: the page follows the delivery until it ends.

use std::time::Duration;

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::webhooks::{
    CreateWebhook, DeleteWebhook, DeliveryView, EndpointPage, RedeliverWebhook, SendWebhookTest,
    SetWebhookEnabled, TestSent, WebhookView, WebhooksView, webhook_delivery, webhook_detail,
    webhooks_overview,
};
use crate::ui::components::confirm::use_confirm;
use crate::ui::components::focus;
use crate::ui::components::form::{
    INPUT, LABEL, PRIMARY_BUTTON, SECONDARY_BUTTON, server_message, use_hydrated,
};
use crate::ui::components::loaded::LoadError;
use crate::ui::components::params::use_id_param;
use crate::ui::components::poll::use_polling;
use crate::ui::components::status_chip::{StatusChip, Tone};
use crate::ui::components::toast::{Toasts, use_toasts};
use crate::ui::pages::not_found::NotFound;

fn delivery_tone(state: &str) -> Tone {
    match state {
        "sending" => Tone::Active,
        "delivered" => Tone::Success,
        _ => Tone::Danger,
    }
}

/// Test messages the page follows until they end, each with a toast at the end.
#[derive(Clone, Copy)]
struct FollowedTests {
    deliveries: RwSignal<Vec<i64>>,
    toasts: Toasts,
}

impl FollowedTests {
    fn new(toasts: Toasts, on_end: impl Fn() + Copy + Send + Sync + 'static) -> Self {
        let followed = FollowedTests {
            deliveries: RwSignal::new(Vec::new()),
            toasts,
        };
        use_polling(Duration::from_millis(400), move || {
            for id in followed.deliveries.get_untracked() {
                leptos::task::spawn_local(async move {
                    let Ok(delivery) = webhook_delivery(id).await else {
                        return;
                    };
                    if delivery.state == "sending" {
                        return;
                    }
                    let was_followed = followed
                        .deliveries
                        .try_update(|list| {
                            let before = list.len();
                            list.retain(|&d| d != id);
                            before != list.len()
                        })
                        .unwrap_or(false);
                    if was_followed {
                        tell_test_outcome(toasts, &delivery);
                        on_end();
                    }
                });
            }
        });
        followed
    }

    /// Tells what "Send test" answered and follows the test it queued; answers whether
    /// one was queued.
    fn take(&self, answer: Option<Result<TestSent, ServerFnError>>) -> bool {
        match answer {
            Some(Ok(sent)) => {
                self.toasts
                    .info("Test message queued: this page tells you when it arrives.");
                self.deliveries.update(|list| list.push(sent.delivery_id));
                true
            }
            Some(Err(error)) => {
                self.toasts.error(server_message(&error));
                false
            }
            None => false,
        }
    }
}

/// Tells what an action answered (its message, or what went wrong), then `refetch`es.
fn tell_then(toasts: Toasts, result: Option<Result<String, ServerFnError>>, refetch: impl Fn()) {
    match result {
        Some(Ok(message)) => toasts.success(message),
        Some(Err(error)) => toasts.error(server_message(&error)),
        None => return,
    }
    refetch();
}

fn tell_test_outcome(toasts: Toasts, delivery: &DeliveryView) {
    let status = delivery
        .response_status
        .map(|status| format!("HTTP {status}"))
        .unwrap_or_else(|| "no answer".into());
    if delivery.state == "delivered" {
        toasts.success(format!("Test message delivered: {status}."));
    } else {
        toasts.error(format!(
            "Test message failed: {}.",
            delivery
                .last_error
                .clone()
                .unwrap_or_else(|| status.clone())
        ));
    }
}

#[component]
pub fn WebhooksPage() -> impl IntoView {
    let toasts = use_toasts();
    let overview = Resource::new(|| (), |_| webhooks_overview());
    let create = ServerAction::<CreateWebhook>::new();
    let toggle = ServerAction::<SetWebhookEnabled>::new();
    let remove = ServerAction::<DeleteWebhook>::new();
    let test = ServerAction::<SendWebhookTest>::new();
    let hydrated = use_hydrated();
    let followed = FollowedTests::new(toasts, move || overview.refetch());
    let secret = RwSignal::new(None::<(String, String)>);

    let after = move |result| tell_then(toasts, result, move || overview.refetch());
    Effect::new(move |_| after(toggle.value().get()));
    Effect::new(move |_| {
        overview.with(|_| ());
        focus::restore_after_render();
    });
    Effect::new(move |_| after(remove.value().get()));
    Effect::new(move |_| match create.value().get() {
        Some(Ok(created)) => {
            toasts.success(format!("Endpoint {} added.", created.webhook.url));
            secret.set(Some((created.webhook.url, created.secret)));
            overview.refetch();
        }
        Some(Err(error)) => toasts.error(server_message(&error)),
        None => {}
    });
    Effect::new(move |_| {
        followed.take(test.value().get());
    });

    view! {
        <Title text="Webhooks"/>
        <div class="flex flex-wrap items-baseline justify-between gap-4">
            <h1 class="text-2xl font-semibold tracking-tight">"Webhooks"</h1>
            <p class="text-sm text-slate-500">"Your other systems hear about events as signed POSTs (Standard Webhooks)."</p>
        </div>
        {move || secret.get().map(|(url, secret)| view! {
            <section class="mt-6 rounded-xl border border-amber-300 bg-amber-50 p-6 text-sm">
                <h2 class="font-semibold text-amber-900">{format!("The signing secret of {url}")}</h2>
                <p class="mt-1 text-amber-900">"Copy it now: it is not shown again. Your receiver verifies each delivery's webhook-signature with it."</p>
                <code data-testid="webhook-secret" class="mt-3 block select-all break-all rounded bg-white px-3 py-2 font-mono text-sm">{secret}</code>
            </section>
        })}
        <Transition fallback=|| view! { <p class="mt-6 text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match overview.await {
                    Ok(view) => view! { <WebhooksBody view=view toggle=toggle remove=remove test=test create=create hydrated=hydrated/> }.into_any(),
                    Err(error) => view! { <LoadError error=error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn WebhooksBody(
    view: WebhooksView,
    toggle: ServerAction<SetWebhookEnabled>,
    remove: ServerAction<DeleteWebhook>,
    test: ServerAction<SendWebhookTest>,
    create: ServerAction<CreateWebhook>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let WebhooksView {
        webhooks,
        event_types,
    } = view;
    let none = webhooks.is_empty();
    view! {
        <section class="mt-6 rounded-xl border border-slate-200 bg-white">
            <h2 class="border-b border-slate-200 px-6 py-3 font-semibold">"Endpoints"</h2>
            {if none {
                view! { <p class="px-6 py-4 text-sm text-slate-500">"No endpoints yet: add one below."</p> }.into_any()
            } else {
                view! {
                    <ul class="divide-y divide-slate-100">
                        {webhooks.into_iter().map(|webhook| view! { <WebhookRow webhook=webhook toggle=toggle remove=remove test=test hydrated=hydrated/> }).collect_view()}
                    </ul>
                }.into_any()
            }}
        </section>
        <AddWebhookForm create=create event_types=event_types hydrated=hydrated/>
    }
    .into_any()
}

#[component]
fn WebhookRow(
    webhook: WebhookView,
    toggle: ServerAction<SetWebhookEnabled>,
    remove: ServerAction<DeleteWebhook>,
    test: ServerAction<SendWebhookTest>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let confirm = use_confirm();
    let id = webhook.id;
    let enabled = webhook.enabled;
    let url = webhook.url.clone();
    view! {
        <li data-testid="webhook-row" data-webhook-id=id.to_string() data-enabled=enabled.to_string() class="flex flex-wrap items-center gap-3 px-6 py-3 text-sm">
            // The whole row's width on a phone (the buttons wrap below it), the rest of
            // it beside them from tablet width up.
            <div class="min-w-0 basis-full sm:basis-0 sm:flex-1">
                <a href=format!("/admin/webhooks/{id}") class="break-all font-medium text-teal-800 hover:underline" data-testid="webhook-url">{webhook.url.clone()}</a>
                <p class="text-xs text-slate-500" data-testid="webhook-types">{webhook.event_types.join(", ")}</p>
                {webhook.disabled_reason.clone().filter(|_| !enabled).map(|reason| view! {
                    <p data-testid="webhook-disabled-reason" class="mt-1 text-xs text-rose-800">{reason}</p>
                })}
            </div>
            <StatusChip label=if enabled { "enabled" } else { "disabled" } tone=if enabled { Tone::Success } else { Tone::Muted } test_id="webhook-state"/>
            <WebhookActions id=id enabled=enabled test=test toggle=toggle hydrated=hydrated/>
            <button type="button" class=SECONDARY_BUTTON disabled=move || !hydrated.get()
                    aria-label=format!("Delete {url}")
                    on:click={
                        let url = url.clone();
                        move |_| {
                            confirm.ask(
                                format!("Delete the endpoint {url}, with its deliveries? It gets no more events."),
                                "Delete",
                                move || { remove.dispatch(DeleteWebhook { id }); },
                            );
                        }
                    }>
                "Delete"
            </button>
        </li>
    }
}

/// An endpoint's "Send test" and "Enable" / "Disable" buttons, alike in its row of the
/// list and on its own page (the keys keep focus on them across a re-render).
#[component]
fn WebhookActions(
    id: i64,
    enabled: bool,
    test: ServerAction<SendWebhookTest>,
    toggle: ServerAction<SetWebhookEnabled>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    view! {
        <button type="button" class=SECONDARY_BUTTON disabled=move || !hydrated.get()
                data-focus-key=format!("webhook-{id}-test")
                on:click=move |_| { test.dispatch(SendWebhookTest { id }); }>
            "Send test"
        </button>
        <button type="button" class=SECONDARY_BUTTON disabled=move || !hydrated.get()
                data-focus-key=format!("webhook-{id}-toggle")
                on:click=move |_| { toggle.dispatch(SetWebhookEnabled { id, enabled: !enabled }); }>
            {if enabled { "Disable" } else { "Enable" }}
        </button>
    }
}

#[component]
fn AddWebhookForm(
    create: ServerAction<CreateWebhook>,
    event_types: Vec<String>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let url = RwSignal::new(String::new());
    let all = RwSignal::new(true);
    let chosen = RwSignal::new(Vec::<String>::new());
    // Added: the form is cleared for the next endpoint.
    Effect::new(move |_| {
        if matches!(create.value().get(), Some(Ok(_))) {
            url.set(String::new());
            all.set(true);
            chosen.set(Vec::new());
        }
    });
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let event_types = if all.get_untracked() {
            "*".to_string()
        } else {
            chosen.get_untracked().join(",")
        };
        create.dispatch(CreateWebhook {
            url: url.get_untracked(),
            event_types,
        });
    };
    view! {
        <section class="mt-6 rounded-xl border border-slate-200 bg-white p-6">
            <h2 class="font-semibold">"Add an endpoint"</h2>
            <form on:submit=submit novalidate class="mt-4 grid gap-4">
                <div>
                    <label for="webhook-url" class=LABEL>"URL"</label>
                    // Disabled until hydrated, as every control here: what was typed
                    // before would be overwritten by the hydrated (empty) value.
                    <input id="webhook-url" name="url" type="url" class=INPUT placeholder="https://example.com/standmeet-webhook"
                           disabled=move || !hydrated.get()
                           prop:value=move || url.get()
                           on:input=move |ev| url.set(event_target_value(&ev))/>
                </div>
                <fieldset>
                    <legend class=LABEL>"Event types"</legend>
                    <div class="mt-2 grid gap-2 sm:grid-cols-2">
                        <label class="flex items-center gap-2 text-sm">
                            <input type="checkbox" name="event_types" value="*"
                                   disabled=move || !hydrated.get()
                                   prop:checked=move || all.get()
                                   on:change=move |ev| all.set(event_target_checked(&ev))/>
                            "All event types (*)"
                        </label>
                        {event_types.into_iter().map(|name| {
                            let value = name.clone();
                            let checked_name = name.clone();
                            view! {
                                <label class="flex items-center gap-2 font-mono text-xs">
                                    <input type="checkbox" name="event_types" value=name.clone()
                                           disabled=move || !hydrated.get()
                                           prop:checked=move || chosen.with(|list| list.contains(&checked_name))
                                           on:change=move |ev| {
                                               let on = event_target_checked(&ev);
                                               let value = value.clone();
                                               chosen.update(|list| {
                                                   list.retain(|v| *v != value);
                                                   if on { list.push(value); }
                                               });
                                               if on { all.set(false); }
                                           }/>
                                    {name}
                                </label>
                            }
                        }).collect_view()}
                    </div>
                </fieldset>
                <div>
                    <button type="submit" class=PRIMARY_BUTTON disabled=move || !hydrated.get() || create.pending().get()>"Add endpoint"</button>
                </div>
            </form>
        </section>
    }
}

#[component]
pub fn WebhookDetailPage() -> impl IntoView {
    let id = use_id_param();
    let toasts = use_toasts();
    let detail = Resource::new(
        move || id.get(),
        |id| async move {
            match id {
                Some(id) => webhook_detail(id, None).await,
                None => Ok(None),
            }
        },
    );
    let redeliver = ServerAction::<RedeliverWebhook>::new();
    let test = ServerAction::<SendWebhookTest>::new();
    let toggle = ServerAction::<SetWebhookEnabled>::new();
    let hydrated = use_hydrated();
    let followed = FollowedTests::new(toasts, move || detail.refetch());

    let after = move |result| tell_then(toasts, result, move || detail.refetch());
    Effect::new(move |_| after(redeliver.value().get()));
    Effect::new(move |_| after(toggle.value().get()));
    Effect::new(move |_| {
        detail.with(|_| ());
        focus::restore_after_render();
    });
    Effect::new(move |_| {
        if followed.take(test.value().get()) {
            detail.refetch();
        }
    });
    // The chips follow deliveries that are still on their way.
    use_polling(Duration::from_secs(1), move || {
        let sending = detail
            .get_untracked()
            .and_then(|answer| answer.ok().flatten())
            .is_some_and(|detail| detail.deliveries.iter().any(|d| d.state == "sending"));
        if sending {
            detail.refetch();
        }
    });

    view! {
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading the endpoint…"</p> }>
            {move || Suspend::new(async move {
                match detail.await {
                    Ok(Some(detail)) => view! { <WebhookDetailView detail=detail redeliver=redeliver test=test toggle=toggle hydrated=hydrated/> }.into_any(),
                    Ok(None) => view! { <NotFound/> }.into_any(),
                    Err(error) => view! { <LoadError error=error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn WebhookDetailView(
    detail: EndpointPage,
    redeliver: ServerAction<RedeliverWebhook>,
    test: ServerAction<SendWebhookTest>,
    toggle: ServerAction<SetWebhookEnabled>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let EndpointPage {
        webhook,
        circuit,
        in_flight: page_in_flight,
        in_flight_words: page_in_flight_words,
        deliveries,
        older_than,
    } = detail;
    let id = webhook.id;
    let enabled = webhook.enabled;
    let none = deliveries.is_empty();
    view! {
        <Title text=format!("Webhook {id}")/>
        <a href="/admin/webhooks" class="text-sm text-teal-700 hover:underline">"← Webhooks"</a>
        <div class="mt-2 flex flex-wrap items-center gap-3" data-testid="webhook-detail" data-webhook-id=id.to_string()>
            <h1 class="break-all text-2xl font-semibold tracking-tight">{webhook.url.clone()}</h1>
            <StatusChip label=if enabled { "enabled" } else { "disabled" } tone=if enabled { Tone::Success } else { Tone::Muted } test_id="webhook-state"/>
            <div class="ml-auto flex gap-2">
                <WebhookActions id=id enabled=enabled test=test toggle=toggle hydrated=hydrated/>
            </div>
        </div>
        <p class="mt-1 text-sm text-slate-600">{format!("Event types: {} · added {}", webhook.event_types.join(", "), webhook.created_at)}</p>
        {webhook.disabled_reason.clone().filter(|_| !enabled).map(|reason| view! {
            <p data-testid="webhook-disabled-reason" class="mt-1 text-sm text-rose-800">{reason}</p>
        })}
        <p data-testid="webhook-circuit" data-circuit=circuit.state.clone()
            class=if circuit.state == "open" { "mt-1 text-sm text-amber-800" } else { "mt-1 text-sm text-slate-600" }>
            {circuit.words}
        </p>
        <p data-testid="webhook-in-flight" data-in-flight=page_in_flight.to_string()
            class="mt-1 text-sm text-slate-600">
            {page_in_flight_words}
        </p>
        <section class="mt-6 overflow-x-auto rounded-xl border border-slate-200 bg-white">
            <h2 class="border-b border-slate-200 px-6 py-3 font-semibold">"Deliveries"</h2>
            {if none {
                view! { <p class="px-6 py-4 text-sm text-slate-500">"No deliveries yet: events of its types and \"Send test\" show up here."</p> }.into_any()
            } else {
                view! {
                    <table class="min-w-full text-left text-sm">
                        <thead class="text-xs uppercase tracking-wide text-slate-500">
                            <tr>
                                <th class="px-6 py-2 font-medium">"Message"</th>
                                <th class="px-3 py-2 font-medium">"State"</th>
                                <th class="px-3 py-2 font-medium">"Answer"</th>
                                <th class="px-3 py-2 font-medium">"Attempts"</th>
                                <th class="px-3 py-2 font-medium">"Created"</th>
                                <th class="px-3 py-2"></th>
                            </tr>
                        </thead>
                        <tbody class="divide-y divide-slate-100">
                            {deliveries.into_iter().map(|delivery| view! { <DeliveryRow delivery=delivery redeliver=redeliver hydrated=hydrated/> }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </section>
        {older_than.map(|_| view! { <p class="mt-3 text-xs text-slate-500">"Only the newest deliveries are shown."</p> })}
    }
    .into_any()
}

#[component]
fn DeliveryRow(
    delivery: DeliveryView,
    redeliver: ServerAction<RedeliverWebhook>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let id = delivery.id;
    let sending = delivery.state == "sending";
    let answer = match (delivery.response_status, delivery.duration_ms) {
        (Some(status), Some(ms)) => format!("{status} in {ms} ms"),
        (Some(status), None) => status.to_string(),
        (None, _) if delivery.attempts == 0 => "—".to_string(),
        (None, _) => "no answer".to_string(),
    };
    let title = delivery.last_error.clone().unwrap_or_default();
    view! {
        <tr data-testid="delivery-row" data-delivery-id=id.to_string() data-job-id=delivery.job_id.map(|j| j.to_string()).unwrap_or_default()>
            <td class="px-6 py-2">
                <span class="font-medium">{delivery.message_type.clone()}</span>
                {delivery.event_id.map(|event| view! { <span class="ml-2 font-mono text-xs text-slate-500">{format!("evt_{event}")}</span> })}
                {delivery.last_error.clone().filter(|_| delivery.state != "delivered").map(|error| view! {
                    <p data-testid="delivery-error" class="mt-1 text-xs text-rose-800">{error}</p>
                })}
            </td>
            <td class="px-3 py-2"><StatusChip label=delivery.state.clone() tone=delivery_tone(&delivery.state) test_id="delivery-state" title=title/></td>
            <td class="px-3 py-2 whitespace-nowrap" data-testid="delivery-status">{answer}</td>
            <td class="px-3 py-2" data-testid="delivery-attempts">{delivery.attempts}</td>
            <td class="px-3 py-2 whitespace-nowrap text-slate-600">{delivery.created_at.clone()}</td>
            <td class="px-3 py-2 text-right">
                <button type="button" class=SECONDARY_BUTTON disabled=move || !hydrated.get() || sending
                        data-focus-key=format!("delivery-{id}-redeliver")
                        on:click=move |_| { redeliver.dispatch(RedeliverWebhook { id }); }>
                    "Redeliver"
                </button>
            </td>
        </tr>
    }
}
