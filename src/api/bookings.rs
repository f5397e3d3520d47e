//! Bookings over HTTP: visitors see the free slots, book one and cancel with their link
//! (public server functions, rate-limited); admins set the availability, list the
//! bookings and cancel them.

// The module, not the function: the browser's call that #[server] generates for
// `save_availability` does not carry the function's own attributes.
#![allow(
    clippy::too_many_arguments,
    reason = "the availability form posts its ten fields by name, one server function argument each"
)]

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;
use serde::{Deserialize, Serialize};

use super::FormError;
use crate::model::{JobState, MailState};

/// One free slot. `start` and `end` are RFC 3339 (UTC); the page shows them in the
/// browser's time zone, and until it is hydrated in the owner's (`owner_day`,
/// `owner_time`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotView {
    pub start: String,
    pub end: String,
    pub owner_day: String,
    pub owner_time: String,
}

/// What `/book` shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookingOffer {
    /// `access`, `open` or `off` (`STANDMEET_BOOKING`).
    pub mode: String,
    /// Why this visitor cannot book, when they cannot (closed, no access code yet).
    pub refusal: Option<String>,
    /// The address this session redeemed its access code with, to fill in.
    pub email: Option<String>,
    /// The owner's time zone (`STANDMEET_TIMEZONE`).
    pub owner_timezone: String,
    pub slot_minutes: i32,
    pub slots: Vec<SlotView>,
}

/// A booking as the visitor is told of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Booked {
    pub id: i64,
    pub start: String,
    pub end: String,
    pub email: String,
    /// "Monday 7 December 2026, 09:00–09:30 (Europe/Berlin)".
    pub owner_when: String,
}

/// A booking as the visitor's cancel page shows it: the time and whether it still
/// stands, nothing of the owner's side (its notification's job, a mail server's reply).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelLinkBooking {
    /// RFC 3339.
    pub start: String,
    /// "Monday 7 December 2026, 09:00–09:30 (Europe/Berlin)".
    pub owner_when: String,
    /// `confirmed` or `cancelled`.
    pub state: String,
}

/// A booking as the admin page shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookingView {
    pub id: i64,
    pub start: String,
    pub owner_when: String,
    pub name: String,
    pub email: String,
    pub topic: String,
    pub state: String,
    pub notify_job_id: Option<i64>,
    pub notify_job_state: Option<JobState>,
    pub mail_state: Option<MailState>,
    pub mail_note: Option<String>,
}

/// The availability as the admin form shows it: one line of windows per weekday
/// ("09:00–12:00, 13:00–17:00"), Monday first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AvailabilityForm {
    pub days: Vec<(String, String)>,
    pub slot_minutes: i32,
    pub buffer_minutes: i32,
    pub days_ahead: i32,
}

/// What `/admin/bookings` shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookingsAdminPage {
    pub owner_timezone: String,
    pub mode: String,
    pub availability: AvailabilityForm,
    pub bookings: Vec<BookingView>,
}

/// The free slots and whether this visitor may book one.
#[server(endpoint = "book/page", input = GetUrl)]
pub async fn book_page() -> Result<BookingOffer, ServerFnError> {
    server::book_page().await
}

/// Books `start` (RFC 3339, one of the free slots) for the visitor.
#[server(endpoint = "book")]
pub async fn book(
    start: String,
    name: String,
    email: String,
    topic: String,
) -> Result<Booked, FormError> {
    server::book(start, name, email, topic).await
}

/// The booking a cancel link names, if the link may still cancel it.
#[server(endpoint = "book/cancel_view", input = GetUrl)]
pub async fn booking_for_cancel_link(
    token: Option<String>,
) -> Result<CancelLinkBooking, ServerFnError> {
    server::booking_for_cancel_link(token.unwrap_or_default()).await
}

/// Cancels the booking a cancel link names (once).
#[server(endpoint = "book/cancel")]
pub async fn cancel_booking_by_link(token: String) -> Result<String, ServerFnError> {
    server::cancel_by_link(token).await
}

/// The admin page: availability and bookings.
#[server(endpoint = "bookings/admin", input = GetUrl)]
pub async fn bookings_admin() -> Result<BookingsAdminPage, ServerFnError> {
    server::admin_page().await
}

/// Saves the availability (every field at once, as the form sends it).
#[server(endpoint = "bookings/availability")]
pub async fn save_availability(
    monday: String,
    tuesday: String,
    wednesday: String,
    thursday: String,
    friday: String,
    saturday: String,
    sunday: String,
    slot_minutes: String,
    buffer_minutes: String,
    days_ahead: String,
) -> Result<AvailabilityForm, ServerFnError> {
    server::save_availability(
        [
            monday, tuesday, wednesday, thursday, friday, saturday, sunday,
        ],
        slot_minutes,
        buffer_minutes,
        days_ahead,
    )
    .await
}

/// An admin cancels a booking; the cancellation mails are queued.
#[server(endpoint = "bookings/cancel")]
pub async fn cancel_booking(id: i64) -> Result<BookingView, ServerFnError> {
    server::admin_cancel(id).await
}

#[cfg(feature = "ssr")]
pub(crate) mod server {
    use jiff::Timestamp;
    use tower_sessions::Session;

    use super::*;
    use crate::api::auth::require_admin;
    use crate::api::replies::{form_reply, reply};
    use crate::domain::bookings::{
        self, Actor, Availability, AvailabilityChange, Booking, NewBooking, WEEKDAYS, Window,
    };
    use crate::error::AppError;
    use crate::security::guard::SESSION_ACCESS_GRANTED;
    use crate::state::AppState;

    /// The most slots `/book` lists (about a month of half hours on weekdays).
    const MAX_SLOTS_SHOWN: usize = 800;

    /// How far ahead `/book` looks, at most, whatever the owner's days ahead.
    const MAX_DAYS_SHOWN: i64 = 60;

    /// The email this visitor's session redeemed an access code with.
    async fn access_email() -> Option<String> {
        let session = leptos_axum::extract::<Session>().await.ok()?;
        session
            .get::<String>(SESSION_ACCESS_GRANTED)
            .await
            .ok()
            .flatten()
    }

    fn owner_when(state: &AppState, booking: &Booking) -> String {
        bookings::owner_when(&state.settings.timezone, booking)
    }

    pub(crate) fn view(state: &AppState, booking: Booking) -> BookingView {
        let mail_state = booking.notify_mail_state();
        let mail_note = match (mail_state, &booking.notify_error) {
            (Some(MailState::Failed), Some(error)) => Some(format!("Last error: {error}")),
            (Some(MailState::Sending), Some(error)) => Some(format!("Retrying after: {error}")),
            _ => None,
        };
        BookingView {
            id: booking.id,
            start: booking.start().to_string(),
            owner_when: owner_when(state, &booking),
            name: booking.name.clone(),
            email: booking.email.clone(),
            topic: booking.topic.clone(),
            state: booking.state.as_str().into(),
            notify_job_id: booking.notify_job_id,
            notify_job_state: booking.notify_job_state,
            mail_state,
            mail_note,
        }
    }

    pub async fn book_page() -> Result<BookingOffer, ServerFnError> {
        let state = expect_context::<AppState>();
        let email = access_email().await;
        let mode = state.settings.booking;
        let tz = &state.settings.timezone;
        let owner = bookings::availability(&state.pool).await.map_err(reply)?;
        let refusal = bookings::may_book(mode, Actor::Visitor, email.is_some())
            .err()
            .map(|err| err.to_string());
        let slots = if refusal.is_some() {
            Vec::new()
        } else {
            // At most a listing's worth: the page shows MAX_SLOTS_SHOWN of them.
            let now = Timestamp::now();
            let until = owner
                .horizon(tz, now)
                .min(now + jiff::SignedDuration::from_hours(24 * MAX_DAYS_SHOWN));
            let mut slots = bookings::free_slots(&state.pool, tz, now, until)
                .await
                .map_err(reply)?;
            slots.truncate(MAX_SLOTS_SHOWN);
            slots
                .into_iter()
                .map(|slot| {
                    let local = slot.start.to_zoned_datetime(tz.clone());
                    SlotView {
                        start: slot.start.to_string(),
                        end: slot.end.to_string(),
                        owner_day: local.strftime("%A %-d %B").to_string(),
                        owner_time: local.strftime("%H:%M").to_string(),
                    }
                })
                .collect()
        };
        Ok(BookingOffer {
            mode: mode.as_str().into(),
            refusal,
            email,
            owner_timezone: bookings::zone_name(tz),
            slot_minutes: owner.slot_minutes,
            slots,
        })
    }

    pub async fn book(
        start: String,
        name: String,
        email: String,
        topic: String,
    ) -> Result<Booked, FormError> {
        let state = expect_context::<AppState>();
        let granted = access_email().await.is_some();
        bookings::may_book(state.settings.booking, Actor::Visitor, granted).map_err(form_reply)?;
        let new = NewBooking::parse(&start, &name, &email, &topic).map_err(form_reply)?;
        if state
            .booking_limiter
            .check(crate::api::client_address().await, new.email.as_str())
            .is_err()
        {
            return Err(form_reply(AppError::TooManyRequests(
                "Too many bookings from here in the last hour. Please try again later.".into(),
            )));
        }
        let booking = bookings::create(
            &state.pool,
            &state.jobs,
            &state.settings.timezone,
            state.settings.calendar_uid_host(),
            &new,
            Actor::Visitor,
        )
        .await
        .map_err(form_reply)?;
        Ok(Booked {
            id: booking.id,
            start: booking.start().to_string(),
            end: booking.end().to_string(),
            email: booking.email.clone(),
            owner_when: owner_when(&state, &booking),
        })
    }

    pub async fn booking_for_cancel_link(
        token: String,
    ) -> Result<CancelLinkBooking, ServerFnError> {
        let state = expect_context::<AppState>();
        let booking = bookings::by_cancel_link(&state.pool, &token)
            .await
            .map_err(reply)?;
        Ok(CancelLinkBooking {
            start: booking.start().to_string(),
            owner_when: owner_when(&state, &booking),
            state: booking.state.as_str().into(),
        })
    }

    pub async fn cancel_by_link(token: String) -> Result<String, ServerFnError> {
        let state = expect_context::<AppState>();
        let booking = bookings::cancel_by_link(&state.pool, &state.jobs, &token)
            .await
            .map_err(reply)?;
        Ok(format!(
            "Booking cancelled: {}. A cancellation is on its way to {} and to the owner.",
            owner_when(&state, &booking),
            booking.email
        ))
    }

    pub(crate) fn availability_form(owner: &Availability) -> AvailabilityForm {
        let days = WEEKDAYS
            .iter()
            .enumerate()
            .map(|(index, day)| {
                let line = owner
                    .windows
                    .iter()
                    .filter(|window| window.weekday as usize == index + 1)
                    .map(|window| format!("{}–{}", window.start, window.end))
                    .collect::<Vec<_>>()
                    .join(", ");
                (day.to_string(), line)
            })
            .collect();
        AvailabilityForm {
            days,
            slot_minutes: owner.slot_minutes,
            buffer_minutes: owner.buffer_minutes,
            days_ahead: owner.days_ahead,
        }
    }

    pub async fn admin_page() -> Result<BookingsAdminPage, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let owner = bookings::availability(&state.pool).await.map_err(reply)?;
        // From a week back: what is coming, and what just happened.
        let from = Timestamp::now() - jiff::SignedDuration::from_hours(24 * 7);
        let rows = bookings::list(&state.pool, Some(from), None, 500)
            .await
            .map_err(reply)?;
        Ok(BookingsAdminPage {
            owner_timezone: bookings::zone_name(&state.settings.timezone),
            mode: state.settings.booking.as_str().into(),
            availability: availability_form(&owner),
            bookings: rows.into_iter().map(|row| view(&state, row)).collect(),
        })
    }

    /// One weekday's line, "09:00–12:00, 13:00–17:00" (a hyphen or a dash), as windows.
    fn parse_day(weekday: i8, line: &str) -> Result<Vec<Window>, String> {
        let day = WEEKDAYS[(weekday - 1) as usize];
        line.split([',', ';'])
            .map(str::trim)
            .filter(|part| !part.is_empty())
            .map(|part| {
                let (start, end) = part.split_once(['–', '—', '-']).ok_or_else(|| {
                    let shown: String = part.chars().take(40).collect();
                    format!("{day}: write each window as 09:00–12:00; \"{shown}\" is not one.")
                })?;
                Ok(Window {
                    weekday,
                    start: start.trim().to_string(),
                    end: end.trim().to_string(),
                })
            })
            .collect()
    }

    fn parse_minutes(label: &str, text: &str) -> Result<i32, String> {
        text.trim().parse::<i32>().map_err(|_| {
            let shown: String = text.trim().chars().take(40).collect();
            format!("{label} must be a whole number; it was \"{shown}\".")
        })
    }

    pub async fn save_availability(
        days: [String; 7],
        slot_minutes: String,
        buffer_minutes: String,
        days_ahead: String,
    ) -> Result<AvailabilityForm, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let mut problems = Vec::new();
        let mut windows = Vec::new();
        for (index, line) in days.iter().enumerate() {
            match parse_day(index as i8 + 1, line) {
                Ok(mut day) => windows.append(&mut day),
                Err(problem) => problems.push(problem),
            }
        }
        let mut number = |label: &str, text: &str| match parse_minutes(label, text) {
            Ok(n) => Some(n),
            Err(problem) => {
                problems.push(problem);
                None
            }
        };
        let slot = number("The slot length", &slot_minutes);
        let buffer = number("The buffer", &buffer_minutes);
        let ahead = number("Days ahead", &days_ahead);
        if !problems.is_empty() {
            return Err(reply(AppError::BadRequest(problems.join(" "))));
        }
        let saved = bookings::set_availability(
            &state.pool,
            AvailabilityChange {
                windows: Some(windows),
                slot_minutes: slot,
                buffer_minutes: buffer,
                days_ahead: ahead,
            },
        )
        .await
        .map_err(reply)?;
        tracing::info!(admin.id = admin.id, "the booking availability was changed");
        Ok(availability_form(&saved))
    }

    pub async fn admin_cancel(id: i64) -> Result<BookingView, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let booking = bookings::cancel(&state.pool, &state.jobs, id, Actor::Admin)
            .await
            .map_err(reply)?;
        tracing::info!(
            admin.id = admin.id,
            booking.id = id,
            "an admin cancelled a booking"
        );
        Ok(view(&state, booking))
    }
}
