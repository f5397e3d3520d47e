//! Bookings: visitors see the free slots, book one and cancel with their link; the
//! owner's side sets the availability, lists the bookings and cancels them. The pages
//! (`api::bookings`) and the tools `bookings.*` answer these views.

use serde::{Deserialize, Serialize};

use crate::model::{BookingState, JobState, MailState};

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
    /// The booking this visitor just made by posting the page's form as plain HTML
    /// (without JavaScript): the page says "Booked" once, as it does after a call.
    #[serde(default)]
    pub just_booked: Option<Booked>,
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
    pub state: BookingState,
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
    pub state: BookingState,
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

#[cfg(feature = "ssr")]
pub use operations::*;

#[cfg(feature = "ssr")]
mod operations {
    use crate::ops::{Operator, Visitor};
    use jiff::Timestamp;

    use super::*;
    use crate::domain::bookings::{self, Actor, Availability, Booking, NewBooking, WEEKDAYS};
    /// What an availability change and its weekly windows are written in (a tool's
    /// arguments take them as they are).
    pub use crate::domain::bookings::{AvailabilityChange, Window};
    use crate::error::AppError;
    use crate::state::AppState;

    /// The most slots `/book` lists (about a month of half hours on weekdays).
    const MAX_SLOTS_SHOWN: usize = 800;

    /// How far ahead `/book` looks, at most, whatever the owner's days ahead.
    const MAX_DAYS_SHOWN: i64 = 60;

    /// When the booking is, in the owner's zone, as pages and mails say it.
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
            state: booking.state,
            notify_job_id: booking.notify_job_id,
            notify_job_state: booking.notify_job_state,
            mail_state,
            mail_note,
        }
    }

    /// What `/book` shows this visitor: the free slots, or why they cannot book.
    pub async fn book_page(state: &AppState, visitor: &Visitor) -> Result<BookingOffer, AppError> {
        let email = visitor.granted.clone();
        let mode = state.settings.booking;
        let tz = &state.settings.timezone;
        let owner = bookings::availability(&state.pool).await?;
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
            let mut slots = bookings::free_slots(&state.pool, tz, now, until).await?;
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
            just_booked: None,
        })
    }

    /// Books `start` (one of the free slots) for the visitor, within the limit on bookings
    /// from one address.
    pub async fn book(
        state: &AppState,
        visitor: &Visitor,
        start: String,
        name: String,
        email: String,
        topic: String,
    ) -> Result<Booked, AppError> {
        let granted = visitor.granted.is_some();
        bookings::may_book(state.settings.booking, Actor::Visitor, granted)?;
        let new = NewBooking::parse(&start, &name, &email, &topic)?;
        if state
            .booking_limiter
            .check(visitor.address, new.email.as_str())
            .is_err()
        {
            return Err(AppError::TooManyRequests(
                "Too many bookings from here in the last hour. Please try again later.".into(),
            ));
        }
        let booking = create_booking(state, &new, Actor::Visitor).await?;
        Ok(Booked {
            id: booking.id,
            start: booking.start().to_string(),
            end: booking.end().to_string(),
            email: booking.email.clone(),
            owner_when: owner_when(state, &booking),
        })
    }

    /// The booking a cancel link names, as its page shows it.
    pub async fn booking_for_cancel_link(
        state: &AppState,
        token: String,
    ) -> Result<CancelLinkBooking, AppError> {
        let booking = bookings::by_cancel_link(&state.pool, &token).await?;
        Ok(CancelLinkBooking {
            start: booking.start().to_string(),
            owner_when: owner_when(state, &booking),
            state: booking.state,
        })
    }

    /// Cancels the booking a cancel link names; both sides are told by mail.
    pub async fn cancel_by_link(state: &AppState, token: String) -> Result<String, AppError> {
        let booking = bookings::cancel_by_link(&state.pool, &state.jobs, &token).await?;
        Ok(format!(
            "Booking cancelled: {}. A cancellation is on its way to {} and to the owner.",
            owner_when(state, &booking),
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

    /// What `/admin/bookings` shows: the availability form and the bookings from a week
    /// back.
    pub async fn admin_page(
        state: &AppState,
        _by: Operator,
    ) -> Result<BookingsAdminPage, AppError> {
        let owner = bookings::availability(&state.pool).await?;
        // From a week back: what is coming, and what just happened.
        let from = Timestamp::now() - jiff::SignedDuration::from_hours(24 * 7);
        let rows = bookings::list(&state.pool, Some(from), None, 500).await?;
        Ok(BookingsAdminPage {
            owner_timezone: bookings::zone_name(&state.settings.timezone),
            mode: state.settings.booking.as_str().into(),
            availability: availability_form(&owner),
            bookings: rows.into_iter().map(|row| view(state, row)).collect(),
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

    /// The availability form's lines as a change: every field, each checked, every
    /// problem told at once.
    fn form_change(
        days: &[String; 7],
        slot_minutes: &str,
        buffer_minutes: &str,
        days_ahead: &str,
    ) -> Result<AvailabilityChange, AppError> {
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
        let slot = number("The slot length", slot_minutes);
        let buffer = number("The buffer", buffer_minutes);
        let ahead = number("Days ahead", days_ahead);
        if !problems.is_empty() {
            return Err(AppError::BadRequest(problems.join(" ")));
        }
        Ok(AvailabilityChange {
            windows: Some(windows),
            slot_minutes: slot,
            buffer_minutes: buffer,
            days_ahead: ahead,
        })
    }

    /// Saves the availability form (every field at once) and answers the form as
    /// saved.
    pub async fn save_availability(
        state: &AppState,
        by: Operator,
        days: [String; 7],
        slot_minutes: String,
        buffer_minutes: String,
        days_ahead: String,
    ) -> Result<AvailabilityForm, AppError> {
        let change = form_change(&days, &slot_minutes, &buffer_minutes, &days_ahead)?;
        let saved = availability(state, by, change).await?;
        Ok(availability_form(&saved.owner))
    }

    /// Who acts, in the words bookings keep (the calendar's and the log's).
    fn actor(by: Operator) -> Actor {
        match by {
            Operator::Admin(_) => Actor::Admin,
            Operator::Agent => Actor::Agent,
        }
    }

    /// An agent may act on bookings only while booking is on (`STANDMEET_BOOKING`);
    /// the console's admin always may.
    fn agent_may_book(state: &AppState, by: Operator) -> Result<(), AppError> {
        if by == Operator::Agent {
            bookings::may_book(state.settings.booking, Actor::Agent, true)?;
        }
        Ok(())
    }

    /// The owner's availability as `bookings.availability` gives it.
    #[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
    pub struct AvailabilityAnswer {
        pub timezone: String,
        #[serde(flatten)]
        pub owner: Availability,
    }

    /// A booking as the tools give it (times in RFC 3339, UTC).
    #[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
    pub struct BookingAnswer {
        pub id: i64,
        pub start: String,
        pub end: String,
        pub name: String,
        pub email: String,
        pub topic: String,
        pub state: BookingState,
        pub notify_job_id: Option<i64>,
        pub confirmation_job_id: Option<i64>,
    }

    impl From<Booking> for BookingAnswer {
        fn from(booking: Booking) -> Self {
            BookingAnswer {
                start: booking.start().to_string(),
                end: booking.end().to_string(),
                id: booking.id,
                name: booking.name,
                email: booking.email,
                topic: booking.topic,
                state: booking.state,
                notify_job_id: booking.notify_job_id,
                confirmation_job_id: booking.confirmation_job_id,
            }
        }
    }

    /// `{"bookings": [booking…]}`, soonest first.
    #[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
    pub struct BookingList {
        pub bookings: Vec<BookingAnswer>,
    }

    /// `{"slots": [{start, end}]}`, RFC 3339 (UTC).
    #[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
    pub struct SlotList {
        pub slots: Vec<Slot>,
    }

    #[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
    pub struct Slot {
        pub start: String,
        pub end: String,
    }

    /// Sets what `change` gives of the owner's availability (nothing: reads it) and
    /// answers the whole of it.
    pub async fn availability(
        state: &AppState,
        by: Operator,
        change: AvailabilityChange,
    ) -> Result<AvailabilityAnswer, AppError> {
        agent_may_book(state, by)?;
        let nothing_to_change = change.windows.is_none()
            && change.slot_minutes.is_none()
            && change.buffer_minutes.is_none()
            && change.days_ahead.is_none();
        let owner = if nothing_to_change {
            bookings::availability(&state.pool).await?
        } else {
            let saved = bookings::set_availability(&state.pool, change).await?;
            tracing::info!(?by, "the booking availability was changed");
            saved
        };
        Ok(AvailabilityAnswer {
            timezone: bookings::zone_name(&state.settings.timezone),
            owner,
        })
    }

    /// The free slots from `from` (RFC 3339; now when not given) for `days` days (1 to
    /// 60; 14 when not given), no further than the owner's days ahead.
    pub async fn slots(
        state: &AppState,
        by: Operator,
        from: Option<&str>,
        days: Option<i64>,
    ) -> Result<SlotList, AppError> {
        agent_may_book(state, by)?;
        let days = days.unwrap_or(14);
        if !(1..=60).contains(&days) {
            return Err(AppError::BadRequest(format!(
                "days must be from 1 to 60; it was {days}."
            )));
        }
        let from = match from {
            Some(text) => bookings::parse_moment("from", text)?,
            None => Timestamp::now(),
        };
        let until = from
            .checked_add(jiff::SignedDuration::from_hours(24 * days))
            .unwrap_or(Timestamp::MAX);
        let slots =
            bookings::free_slots(&state.pool, &state.settings.timezone, from, until).await?;
        Ok(SlotList {
            slots: slots
                .iter()
                .map(|slot| Slot {
                    start: slot.start.to_string(),
                    end: slot.end.to_string(),
                })
                .collect(),
        })
    }

    /// Bookings that start in [from, to) (RFC 3339, both optional), soonest first,
    /// cancelled ones included.
    pub async fn list(
        state: &AppState,
        by: Operator,
        from: Option<&str>,
        to: Option<&str>,
    ) -> Result<BookingList, AppError> {
        agent_may_book(state, by)?;
        let from = from
            .map(|text| bookings::parse_moment("from", text))
            .transpose()?;
        let to = to
            .map(|text| bookings::parse_moment("to", text))
            .transpose()?;
        let rows = bookings::list(&state.pool, from, to, 1_000).await?;
        Ok(BookingList {
            bookings: rows.into_iter().map(BookingAnswer::from).collect(),
        })
    }

    /// Books a free slot for someone, by the rules of `/book`: the owner is told and
    /// the person invited by mail (jobs, not waited for).
    pub async fn create(
        state: &AppState,
        by: Operator,
        start: &str,
        name: &str,
        email: &str,
        topic: &str,
    ) -> Result<BookingAnswer, AppError> {
        agent_may_book(state, by)?;
        let new = NewBooking::parse(start, name, email, topic)?;
        Ok(create_booking(state, &new, actor(by)).await?.into())
    }

    /// Books for whoever acts (the calendar's invitation and the log say who).
    async fn create_booking(
        state: &AppState,
        new: &NewBooking,
        actor: Actor,
    ) -> Result<Booking, AppError> {
        Ok(bookings::create(
            &state.pool,
            &state.jobs,
            &state.settings.timezone,
            state.settings.calendar_uid_host(),
            new,
            actor,
        )
        .await?)
    }

    /// Cancels a booking: both sides get a cancellation by mail (a job).
    pub async fn cancel(state: &AppState, by: Operator, id: i64) -> Result<Booking, AppError> {
        agent_may_book(state, by)?;
        let booking = bookings::cancel(&state.pool, &state.jobs, id, actor(by)).await?;
        tracing::info!(?by, booking.id = id, "a booking was cancelled");
        Ok(booking)
    }
}
