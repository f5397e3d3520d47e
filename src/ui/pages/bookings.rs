//! `/admin/bookings`: when the owner is free (weekly windows in the owner's time zone,
//! the slot length, the buffer between meetings, how many days ahead), and the bookings
//! with the owner's notification chip (sending → sent or failed, live) and "Cancel".

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::bookings::{
    AvailabilityForm, BookingView, CancelBooking, SaveAvailability, bookings_admin,
};
use crate::api::tasks::TaskRow;
use crate::model::BookingState;
use crate::model::{JobId, JobState, MailState};
use crate::ui::components::confirm::use_confirm;
use crate::ui::components::focus;
use crate::ui::components::form::{
    INPUT, LABEL, PRIMARY_BUTTON, SECONDARY_BUTTON, server_message, use_hydrated,
};
use crate::ui::components::live::FollowsJob;
use crate::ui::components::loaded::LoadError;
use crate::ui::components::status_chip::{StatusChip, Tone, mail_state_tone};
use crate::ui::components::table::{ACTION_CELL, CELL, FollowedTable, ROW};
use crate::ui::components::toast::use_toasts;

#[component]
pub fn BookingsPage() -> impl IntoView {
    let page = Resource::new(|| (), |_| bookings_admin());
    view! {
        <Title text="Bookings"/>
        <h1 class="text-2xl font-semibold tracking-tight">"Bookings"</h1>
        <Suspense fallback=|| view! { <p class="mt-6 text-sm text-slate-500">"Loading bookings…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(data) => view! {
                        <p class="mt-2 text-sm text-slate-600">
                            {format!("Times are in the owner's time zone, {} (STANDMEET_TIMEZONE). Who may book: {} (STANDMEET_BOOKING).", data.owner_timezone, data.mode)}
                        </p>
                        <AvailabilityEditor form=data.availability/>
                        <h2 class="mt-10 text-lg font-semibold">"Meetings"</h2>
                        <FollowedTable rows=data.bookings columns=&["When", "Who", "Topic", "State", "Owner told", ""]
                            key=|booking: &BookingView| booking.id
                            row=|row| view! { <BookingRow row=row/> }
                            empty="No meetings booked."/>
                    }.into_any(),
                    Err(error) => view! { <LoadError error=error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn AvailabilityEditor(form: AvailabilityForm) -> impl IntoView {
    let save = ServerAction::<SaveAvailability>::new();
    let toasts = use_toasts();
    let hydrated = use_hydrated();
    Effect::new(move |_| {
        if let Some(Ok(_)) = save.value().get() {
            toasts.success("Availability saved.");
        }
    });
    let problem = move || match save.value().get() {
        Some(Err(error)) => Some(server_message(&error)),
        _ => None,
    };
    view! {
        <ActionForm action=save attr:novalidate=true attr:class="mt-6 rounded-xl border border-slate-200 bg-white p-6 shadow-sm" attr:aria-label="Availability">
            <h2 class="text-lg font-semibold">"Availability"</h2>
            <p class="mt-1 text-sm text-slate-600">"Windows per weekday, such as 09:00–12:00, 13:00–17:00; leave a day empty when you are not free."</p>
            <div class="mt-4 grid gap-3 sm:grid-cols-2">
                {form.days.into_iter().map(|(day, line)| {
                    let id = format!("availability-{}", day.to_lowercase());
                    view! {
                        <div>
                            <label for=id.clone() class=LABEL>{day.clone()}</label>
                            <input id=id name=day.to_lowercase() type="text" value=line class=INPUT placeholder="Not free"/>
                        </div>
                    }
                }).collect_view()}
            </div>
            <div class="mt-4 grid gap-3 sm:grid-cols-3">
                <div>
                    <label for="availability-slot" class=LABEL>"Slot length (minutes)"</label>
                    <input id="availability-slot" name="slot_minutes" type="number" min="5" max="480" value=form.slot_minutes.to_string() class=INPUT/>
                </div>
                <div>
                    <label for="availability-buffer" class=LABEL>"Buffer between meetings (minutes)"</label>
                    <input id="availability-buffer" name="buffer_minutes" type="number" min="0" max="240" value=form.buffer_minutes.to_string() class=INPUT/>
                </div>
                <div>
                    <label for="availability-days" class=LABEL>"Days ahead"</label>
                    <input id="availability-days" name="days_ahead" type="number" min="1" max="365" value=form.days_ahead.to_string() class=INPUT/>
                </div>
            </div>
            {move || problem().map(|text| view! {
                <p role="alert" class="mt-4 rounded-md border border-rose-200 bg-rose-50 px-3 py-2 text-sm text-rose-900">{text}</p>
            })}
            <button type="submit" class=format!("mt-4 {PRIMARY_BUTTON}") disabled=move || !hydrated.get() || save.pending().get()>
                "Save availability"
            </button>
        </ActionForm>
    }
}

fn state_tone(state: BookingState) -> Tone {
    match state {
        BookingState::Confirmed => Tone::Success,
        BookingState::Cancelled => Tone::Muted,
    }
}

#[component]
fn BookingRow(row: RwSignal<BookingView>) -> impl IntoView {
    let confirm = use_confirm();
    let toasts = use_toasts();
    let cancel = ServerAction::<CancelBooking>::new();
    let hydrated = use_hydrated();
    Effect::new(move |_| match cancel.value().get() {
        Some(Ok(updated)) => {
            toasts.success("Booking cancelled. The cancellation mails are queued.");
            row.set(updated);
            focus::restore_after_render();
        }
        Some(Err(error)) => toasts.error(server_message(&error)),
        None => {}
    });
    let id = row.get_untracked().id;
    view! {
        <tr data-testid="booking-row" data-booking-id=id.to_string() class=format!("{ROW} md:align-top")>
            <td class=format!("{CELL} md:whitespace-nowrap focus:outline-none focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600") data-label="When" tabindex="-1" data-focus-key=format!("booking-{id}")>
                <span data-testid="booking-when">{move || row.get().owner_when}</span>
            </td>
            <td class=CELL data-label="Who">
                <div class="min-w-0 break-words">
                    <div class="font-medium">{move || row.get().name}</div>
                    <div class="text-slate-500">{move || row.get().email}</div>
                </div>
            </td>
            <td class=format!("{CELL} md:max-w-sm whitespace-pre-wrap break-words text-slate-700") data-label="Topic">{move || row.get().topic}</td>
            <td class=CELL data-label="State">
                {move || { let state = row.get().state; view! { <StatusChip label=state.as_str() tone=state_tone(state) test_id="booking-state"/> } }}
            </td>
            <td class=CELL data-label="Owner told">
                {move || {
                    let current = row.get();
                    match current.mail_state {
                        Some(state) => view! {
                            <StatusChip label=state.as_str() tone=mail_state_tone(state) test_id="booking-mail-state" title=current.mail_note.unwrap_or_default()/>
                        }.into_any(),
                        None => view! { <span data-testid="booking-mail-state" data-state="none" class="text-slate-400">"—"</span> }.into_any(),
                    }
                }}
            </td>
            <td class=format!("{ACTION_CELL} md:whitespace-nowrap md:text-right")>
                <Show when=move || row.get().state == BookingState::Confirmed>
                    <button type="button" class=SECONDARY_BUTTON data-focus-key=format!("booking-cancel-{id}")
                        disabled=move || !hydrated.get() || cancel.pending().get()
                        on:click=move |_| {
                            let what = row.with_untracked(|row| format!("the meeting with {} <{}> on {}", row.name, row.email, row.owner_when));
                            confirm.ask(
                                format!("Cancel {what}? Both of you get a cancellation by mail, and the time becomes free again."),
                                "Cancel booking",
                                move || {
                                    focus::remember_key(&format!("booking-{id}"));
                                    cancel.dispatch(CancelBooking { id });
                                },
                            );
                        }
                    >"Cancel"</button>
                </Show>
            </td>
        </tr>
    }
    .into_any()
}

/// A booking's chip follows the owner's notification mail.
impl FollowsJob for BookingView {
    fn followed_job(&self) -> (Option<JobId>, Option<JobState>) {
        (self.notify_job_id.map(JobId), self.notify_job_state)
    }

    fn job_moved(&mut self, job: &TaskRow) {
        self.notify_job_state = Some(job.state);
        self.mail_state = Some(MailState::of_job(job.state));
        self.mail_note = match (job.state, &job.last_error) {
            (JobState::Completed, _) => None,
            (_, Some(error)) => Some(format!("Last error: {error}")),
            _ => None,
        };
    }
}
