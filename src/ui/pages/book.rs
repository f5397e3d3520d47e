//! `/book`: a visitor books a meeting with the owner. The free slots are grouped by day
//! in the visitor's own time zone (the browser's; until the page is hydrated, the
//! owner's), each a button `data-testid="slot"` with `data-start` (RFC 3339). Picking
//! one and sending name, email and topic books it at once: the page says "Booked" and
//! the mails follow as jobs.
//!
//! A visitor's page is not hydrated (`crate::ui::hydration`): the form posts as
//! plain HTML, the page's script (`ui/desk.js`) makes the slot buttons pick and shows
//! the times in the browser's zone, and without any script a list of the free times
//! stands in for the buttons. `/book/cancel?token=…` is where the mail's cancel link
//! leads: a page with a button, so that a mail scanner opening the link cancels nothing.

use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::bookings::{
    Book, Booked, BookingOffer, CancelBookingByLink, SlotView, book_page, booking_for_cancel_link,
};
use crate::ui::components::form::{
    INPUT, LABEL, PRIMARY_BUTTON, SECONDARY_BUTTON, server_message, use_hydrated,
};
use crate::ui::hydration::page_hydrates;

/// What the cancel link's page is told of a booking cancelled before
/// (`domain::bookings::BookingError::LinkUsed`; a test keeps them equal).
const CANCELLED_ALREADY: &str = "This booking is cancelled already.";

const ALERT: &str =
    "mt-4 rounded-md border border-rose-200 bg-rose-50 px-3 py-2 text-sm text-rose-900";

#[component]
pub fn BookPage() -> impl IntoView {
    let page = Resource::new(|| (), |_| book_page());
    view! {
        <Title text="Book a meeting"/>
        <section class="mx-auto max-w-3xl">
            <h1 class="text-2xl font-semibold tracking-tight">"Book a meeting"</h1>
            <Suspense fallback=|| view! { <p class="mt-6 text-sm text-slate-500">"Loading free times…"</p> }>
                {move || Suspend::new(async move {
                    match page.await {
                        Ok(data) => view! { <Booking data=data/> }.into_any(),
                        Err(error) => view! { <p role="alert" class=ALERT>{server_message(&error)}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

/// A slot's day and time as this page shows them: in the browser's zone once hydrated,
/// else in the owner's (as the server wrote them).
fn slot_labels(slot: &SlotView, in_browser: bool) -> (String, String) {
    if in_browser && let Some(labels) = browser::labels(&slot.start) {
        return labels;
    }
    (slot.owner_day.clone(), slot.owner_time.clone())
}

/// The slots grouped by day, in order.
fn by_day(slots: &[SlotView], in_browser: bool) -> Vec<(String, Vec<(SlotView, String)>)> {
    let mut days: Vec<(String, Vec<(SlotView, String)>)> = Vec::new();
    for slot in slots {
        let (day, time) = slot_labels(slot, in_browser);
        match days.last_mut() {
            Some((last, list)) if *last == day => list.push((slot.clone(), time)),
            _ => days.push((day, vec![(slot.clone(), time)])),
        }
    }
    days
}

#[component]
fn Booking(data: BookingOffer) -> impl IntoView {
    if let Some(refusal) = data.refusal.clone() {
        let closed = data.mode == "off";
        return view! {
            <div data-testid="booking-refused" class="mt-6 rounded-xl border border-slate-200 bg-white p-6">
                <p class="font-medium">{if closed { "Bookings are closed.".to_string() } else { refusal }}</p>
                {(!closed).then(|| view! {
                    <p class="mt-2 text-sm text-slate-600">
                        <a href="/access" class="font-medium text-teal-700 underline">"Enter a code"</a>
                        " if you have one, or "
                        <a href="/request-access" class="font-medium text-teal-700 underline">"request access"</a>
                        "."
                    </p>
                })}
            </div>
        }
        .into_any();
    }

    let hydrated = use_hydrated();
    // The browser's zone, once hydrated (the server cannot know it).
    let zone = Memo::new(move |_| {
        if hydrated.get() {
            browser::zone()
        } else {
            None
        }
    });
    let in_browser = move || zone.get().is_some();
    // The free slots as this page knows them: a slot someone else just took leaves the
    // list at once, and the list is read again (without leaving the page, so what the
    // visitor typed stays).
    let slots = RwSignal::new(data.slots.clone());
    let selected: RwSignal<Option<SlotView>> = RwSignal::new(None);
    let name = RwSignal::new(String::new());
    let email = RwSignal::new(data.email.clone().unwrap_or_default());
    let topic = RwSignal::new(String::new());
    let book = ServerAction::<Book>::new();
    // Booked by a plain form post, or refused one (the address says why).
    let booked: RwSignal<Option<Booked>> = RwSignal::new(data.just_booked.clone());
    let problem: RwSignal<Option<String>> = RwSignal::new(
        book.value()
            .get_untracked()
            .and_then(Result::err)
            .map(|error| error.message),
    );
    // Which of the two ways to name the slot is sent: the picked button's (a hidden
    // field, filled in by a script) or, without scripts, the list's.
    let scripted = page_hydrates();
    Effect::new(move |_| match book.value().get() {
        Some(Ok(answer)) => {
            problem.set(None);
            booked.set(Some(answer));
        }
        Some(Err(error)) => {
            let taken = error.message.starts_with("That time was just taken");
            problem.set(Some(error.message));
            if taken {
                if let Some(gone) = selected.get_untracked() {
                    slots.update(|slots| slots.retain(|slot| slot.start != gone.start));
                }
                selected.set(None);
                leptos::task::spawn_local(async move {
                    if let Ok(fresh) = book_page().await {
                        slots.set(fresh.slots);
                    }
                });
            }
        }
        None => {}
    });
    let owner_zone = data.owner_timezone.clone();
    let zone_text = move || match zone.get() {
        Some(zone) => format!("Times are shown in your time zone ({zone})."),
        None => format!("Times are shown in the owner's time zone ({owner_zone})."),
    };
    let submit = move |event: leptos::ev::SubmitEvent| {
        event.prevent_default();
        let Some(slot) = selected.get_untracked() else {
            problem.set(Some("Pick one of the free times first.".into()));
            return;
        };
        book.dispatch(Book {
            start: slot.start,
            name: name.get_untracked(),
            email: email.get_untracked(),
            topic: topic.get_untracked(),
        });
    };
    let no_slots = data.slots.is_empty();
    let booked_when = move || {
        booked.get().map(|answer| {
            let start = SlotView {
                start: answer.start.clone(),
                end: answer.end.clone(),
                owner_day: String::new(),
                owner_time: String::new(),
            };
            match browser::labels(&start.start) {
                Some((day, time)) if in_browser() => format!("{day}, {time}"),
                _ => answer.owner_when.clone(),
            }
        })
    };

    view! {
        <Show
            when=move || booked.with(Option::is_none)
            fallback=move || view! {
                <div data-testid="booked" role="status" class="mt-6 rounded-xl border border-emerald-200 bg-emerald-50 p-6 text-emerald-900">
                    <h2 class="font-semibold">"Booked"</h2>
                    <p class="mt-1">{booked_when}</p>
                    <p class="mt-1 text-sm">
                        {move || booked.get().map(|answer| format!(
                            "A confirmation with a calendar invitation is on its way to {}. It has a link to cancel, should you need to.",
                            answer.email
                        ))}
                    </p>
                </div>
            }
        >
            <p class="mt-2 text-slate-600">"Pick a time, then tell the owner who you are and what you would like to talk about."</p>
            <p class="mt-1 text-sm text-slate-500" data-testid="booking-zone">{zone_text.clone()}</p>
            {no_slots.then(|| view! {
                <p class="mt-6 rounded-xl border border-slate-200 bg-white p-6 text-slate-600" data-testid="no-slots">
                    "No free times in the coming days. Please look again later."
                </p>
            })}
            <div id="booking-slots" class="mt-6 space-y-5 noscript:hidden">
                {
                    move || slots.with(|slots| by_day(slots, in_browser())).into_iter().map(|(day, list)| view! {
                        <section>
                            <h2 class="text-sm font-semibold text-slate-700">{day}</h2>
                            <div class="mt-2 flex flex-wrap gap-2">
                                {list.into_iter().map(|(slot, time)| {
                                    let start = slot.start.clone();
                                    let pressed = {
                                        let start = start.clone();
                                        move || selected.with(|chosen| chosen.as_ref().is_some_and(|chosen| chosen.start == start))
                                    };
                                    let pressed_attr = pressed.clone();
                                    view! {
                                        <button
                                            type="button"
                                            data-testid="slot"
                                            data-start=start.clone()
                                            disabled=move || !hydrated.get()
                                            aria-pressed=move || if pressed_attr() { "true" } else { "false" }
                                            class="rounded-md border border-slate-300 bg-white px-3 py-1.5 text-sm tabular-nums hover:border-teal-600 aria-pressed:border-teal-700 aria-pressed:bg-teal-700 aria-pressed:text-white"
                                            on:click=move |_| { problem.set(None); selected.set(Some(slot.clone())); }
                                        >{time}</button>
                                    }
                                }).collect_view()}
                            </div>
                        </section>
                    }).collect_view()
                }
            </div>
            {(!no_slots).then(|| view! {
                <form id="booking-form" method="post" action={<Book as ServerFn>::url()} novalidate on:submit=submit class="mt-8 space-y-4 rounded-xl border border-slate-200 bg-white p-6 shadow-sm">
                    <p class="text-sm text-slate-600 noscript:hidden" data-testid="selected-slot">
                        {move || match selected.get() {
                            Some(slot) => { let (day, time) = slot_labels(&slot, in_browser()); format!("Your time: {day}, {time}") }
                            None => "Pick a time above.".to_string(),
                        }}
                    </p>
                    <input type="hidden" id="booking-start" name="start" disabled=!scripted
                        prop:value=move || selected.get().map(|slot| slot.start).unwrap_or_default()/>
                    <div class="hidden noscript:block">
                        <label for="booking-time" class=LABEL>"Time"</label>
                        <select id="booking-time" name="start" disabled=scripted class=INPUT>
                            <option value="">"Pick a time"</option>
                            {move || slots.with(|slots| by_day(slots, false)).into_iter().map(|(day, list)| view! {
                                <optgroup label=day>
                                    {list.into_iter().map(|(slot, time)| view! { <option value=slot.start>{time}</option> }).collect_view()}
                                </optgroup>
                            }).collect_view()}
                        </select>
                    </div>
                    <div>
                        <label for="booking-name" class=LABEL>"Name"</label>
                        <input id="booking-name" name="name" type="text" autocomplete="name" class=INPUT disabled=move || !hydrated.get() bind:value=name/>
                    </div>
                    <div>
                        <label for="booking-email" class=LABEL>"Email"</label>
                        <input id="booking-email" name="email" type="email" autocomplete="email" class=INPUT disabled=move || !hydrated.get()
                            // The address the access code was for, also in the HTML (the
                            // binding sets it only in the browser).
                            value=data.email.clone().unwrap_or_default() bind:value=email/>
                    </div>
                    <div>
                        <label for="booking-topic" class=LABEL>"Topic"</label>
                        <textarea id="booking-topic" name="topic" rows="3" class=INPUT disabled=move || !hydrated.get() bind:value=topic></textarea>
                    </div>
                    {move || problem.get().map(|text| view! { <p role="alert" class=ALERT>{text}</p> })}
                    <button type="submit" class=format!("w-full {PRIMARY_BUTTON}") disabled=move || !hydrated.get() || book.pending().get()>
                        "Book"
                    </button>
                </form>
            }
            // Boxed: the form's type is too deep for the release wasm's compile.
            .into_any())}
        </Show>
    }
    .into_any()
}

/// `/book/cancel?token=…`: the booking the link names, and a button that cancels it.
#[component]
pub fn CancelBookingPage() -> impl IntoView {
    let query = use_query_map();
    let token = Memo::new(move |_| query.read().get("token").unwrap_or_default());
    let booking = Resource::new(
        move || token.get(),
        |token| booking_for_cancel_link(Some(token)),
    );
    let cancel = ServerAction::<CancelBookingByLink>::new();
    let hydrated = use_hydrated();
    // Cancelled by a plain form post: the server sent the browser back here, where the
    // link now names a booking that is cancelled already, which is what it was asked.
    let cancelled_by_post = move |error: &ServerFnError| {
        query.with(|query| query.get_str("cancelled").is_some())
            && server_message(error) == CANCELLED_ALREADY
    };
    view! {
        <Title text="Cancel a booking"/>
        <section class="mx-auto max-w-lg">
            <h1 class="text-2xl font-semibold tracking-tight">"Cancel a booking"</h1>
            <Suspense fallback=|| view! { <p class="mt-6 text-sm text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match booking.await {
                        Err(error) if cancelled_by_post(&error) => view! {
                            <div data-testid="booking-cancelled" role="status" class="mt-6 rounded-xl border border-emerald-200 bg-emerald-50 p-6 text-emerald-900">
                                <h2 class="font-semibold">"Booking cancelled"</h2>
                                <p class="mt-1 text-sm">"A cancellation is on its way to you and to the owner. The time is free for others again."</p>
                            </div>
                        }.into_any(),
                        Err(error) => view! { <p role="alert" data-testid="cancel-refused" class=ALERT>{server_message(&error)}</p> }.into_any(),
                        Ok(found) => view! {
                            <Show
                                when=move || !matches!(cancel.value().get(), Some(Ok(_)))
                                fallback=move || view! {
                                    <div data-testid="booking-cancelled" role="status" class="mt-6 rounded-xl border border-emerald-200 bg-emerald-50 p-6 text-emerald-900">
                                        <h2 class="font-semibold">"Booking cancelled"</h2>
                                        <p class="mt-1 text-sm">{move || match cancel.value().get() { Some(Ok(message)) => message, _ => String::new() }}</p>
                                    </div>
                                }
                            >
                                <div class="mt-6 rounded-xl border border-slate-200 bg-white p-6">
                                    <p>"Your meeting:"</p>
                                    <p class="mt-1 font-medium" data-testid="cancel-booking-when" data-start=found.start.clone()>{found.owner_when.clone()}</p>
                                    {
                                        let start = found.start.clone();
                                        move || hydrated.get().then(|| browser::labels(&start)).flatten().map(|(day, time)| view! {
                                            <p class="text-sm text-slate-600">{format!("That is {day}, {time} where you are.")}</p>
                                        })
                                    }
                                    <p class="mt-4 text-sm text-slate-600">"Cancelling tells the owner and sends you a cancellation for your calendar. The time becomes free for others."</p>
                                    {move || match cancel.value().get() {
                                        Some(Err(error)) => Some(view! { <p role="alert" class=ALERT>{server_message(&error)}</p> }),
                                        _ => None,
                                    }}
                                    // A form, so that it posts as plain HTML where the page is not
                                    // hydrated; a hydrated page calls instead.
                                    <form method="post" action={<CancelBookingByLink as ServerFn>::url()} class="mt-4 flex gap-3"
                                        on:submit=move |event| {
                                            event.prevent_default();
                                            cancel.dispatch(CancelBookingByLink { token: token.get_untracked() });
                                        }
                                    >
                                        <input type="hidden" name="token" value=move || token.get()/>
                                        <button type="submit" class=PRIMARY_BUTTON
                                            disabled=move || !hydrated.get() || cancel.pending().get()
                                        >"Cancel booking"</button>
                                        <a href="/" class=SECONDARY_BUTTON>"Keep it"</a>
                                    </form>
                                </div>
                            </Show>
                        }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

/// The browser's clock: its time zone and how it writes a moment. Nothing on the
/// server (it cannot know where the visitor is).
mod browser {
    /// The browser's IANA time zone, such as "Europe/Berlin".
    pub fn zone() -> Option<String> {
        #[cfg(feature = "hydrate")]
        {
            use js_sys::{Array, Intl, Object, Reflect};
            let format = Intl::DateTimeFormat::new(&Array::new(), &Object::new());
            let options = format.resolved_options();
            Reflect::get(&options, &"timeZone".into())
                .ok()
                .and_then(|zone| zone.as_string())
        }
        #[cfg(not(feature = "hydrate"))]
        {
            None
        }
    }

    /// An RFC 3339 moment's day ("Monday 7 December") and time ("09:00") in the
    /// browser's zone.
    pub fn labels(rfc3339: &str) -> Option<(String, String)> {
        #[cfg(feature = "hydrate")]
        {
            use js_sys::{Date, Object, Reflect};
            use wasm_bindgen::JsValue;
            let date = Date::new(&JsValue::from_str(rfc3339));
            if date.get_time().is_nan() {
                return None;
            }
            let set = |options: &Object, key: &str, value: &str| {
                let _ = Reflect::set(options, &key.into(), &value.into());
            };
            let day_options = Object::new();
            set(&day_options, "weekday", "long");
            set(&day_options, "day", "numeric");
            set(&day_options, "month", "long");
            let time_options = Object::new();
            set(&time_options, "hour", "2-digit");
            set(&time_options, "minute", "2-digit");
            set(&time_options, "hourCycle", "h23");
            let day: String = date.to_locale_date_string("en-GB", &day_options).into();
            let time: String = date
                .to_locale_time_string_with_options("en-GB", &time_options)
                .into();
            Some((day.replace(',', ""), time))
        }
        #[cfg(not(feature = "hydrate"))]
        {
            let _ = rfc3339;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    /// The cancel link's page knows a used link by the words the server answers it with.
    #[cfg(feature = "ssr")]
    #[test]
    fn a_used_link_is_known_by_the_domains_own_words() {
        assert_eq!(
            crate::domain::bookings::BookingError::LinkUsed.to_string(),
            super::CANCELLED_ALREADY
        );
    }
}
