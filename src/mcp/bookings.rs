//! Bookings as tools: `bookings.availability`, `bookings.slots`, `bookings.list`,
//! `bookings.create`, `bookings.cancel` (as `api::bookings`).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tools, respond};
use crate::domain::bookings::{self, Actor, AvailabilityChange, BookingError, NewBooking};
use crate::error::AppError;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AvailabilityParams {
    /// The weekly windows, replacing all of them: [{weekday: 1-7 (Monday 1), start:
    /// "HH:MM", end: "HH:MM"}], in the owner's time zone. Unchanged when not given.
    pub windows: Option<Vec<bookings::Window>>,
    /// The length of a slot in minutes (5 to 480).
    pub slot_minutes: Option<i32>,
    /// The free minutes kept between two meetings (0 to 240).
    pub buffer_minutes: Option<i32>,
    /// How many days ahead may be booked, today included (1 to 365).
    pub days_ahead: Option<i32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BookingIdParams {
    /// The id of the booking.
    pub id: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateBookingParams {
    /// The slot's start, as bookings.slots gives it (RFC 3339).
    pub start: String,
    /// Who the meeting is with.
    pub name: String,
    /// Their email address: the invitation goes there.
    pub email: String,
    /// What it is about.
    pub topic: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListBookingsParams {
    /// Only bookings that start at or after this time (RFC 3339).
    pub from: Option<String>,
    /// Only bookings that start before this time (RFC 3339).
    pub to: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SlotsParams {
    /// From when (RFC 3339, such as 2026-12-07T00:00:00Z); now when not given.
    pub from: Option<String>,
    /// How many days from `from` (1 to 60; 14 when not given).
    pub days: Option<i64>,
}

#[tool_router(router = bookings_tools, vis = "pub(super)")]
impl Tools {
    #[tool(
        name = "bookings.availability",
        description = "Sets what it is given of the owner's availability (weekly windows in the owner's time zone, slot length, buffer, days ahead) and answers the whole of it: {timezone, windows: [{weekday, start, end}], slot_minutes, buffer_minutes, days_ahead}. Call it with no arguments to read it."
    )]
    async fn bookings_availability(
        &self,
        Parameters(params): Parameters<AvailabilityParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let change = AvailabilityChange {
            windows: params.windows,
            slot_minutes: params.slot_minutes,
            buffer_minutes: params.buffer_minutes,
            days_ahead: params.days_ahead,
        };
        if let Err(closed) = bookings::may_book(self.state.settings.booking, Actor::Agent, true) {
            return respond(Err(closed.into()));
        }
        let nothing_to_change = change.windows.is_none()
            && change.slot_minutes.is_none()
            && change.buffer_minutes.is_none()
            && change.days_ahead.is_none();
        let pool = &self.state.pool;
        let owner = if nothing_to_change {
            bookings::availability(pool).await
        } else {
            bookings::set_availability(pool, change).await
        };
        let timezone = bookings::zone_name(&self.state.settings.timezone);
        respond(
            owner
                .map(|owner| {
                    json!({
                        "timezone": timezone,
                        "windows": owner.windows,
                        "slot_minutes": owner.slot_minutes,
                        "buffer_minutes": owner.buffer_minutes,
                        "days_ahead": owner.days_ahead,
                    })
                })
                .map_err(AppError::from),
        )
    }

    #[tool(
        name = "bookings.slots",
        description = "The free slots from `from` (now when not given) for `days` days (1-60, 14 when not given), no further than the owner's days ahead: {slots: [{start, end}]} in RFC 3339 (UTC)."
    )]
    async fn bookings_slots(
        &self,
        Parameters(params): Parameters<SlotsParams>,
    ) -> Result<CallToolResult, ErrorData> {
        respond(self.slots(params).await)
    }

    #[tool(
        name = "bookings.list",
        description = "Bookings that start in [from, to) (both optional, RFC 3339), soonest first, cancelled ones included: {bookings: [{id, start, end, name, email, topic, state: confirmed|cancelled, notify_job_id, confirmation_job_id}]}."
    )]
    async fn bookings_list(
        &self,
        Parameters(params): Parameters<ListBookingsParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let listed = async {
            bookings::may_book(self.state.settings.booking, Actor::Agent, true)?;
            let from = params
                .from
                .as_deref()
                .map(|text| bookings::parse_moment("from", text))
                .transpose()?;
            let to = params
                .to
                .as_deref()
                .map(|text| bookings::parse_moment("to", text))
                .transpose()?;
            let rows = bookings::list(&self.state.pool, from, to, 1_000).await?;
            Ok::<_, AppError>(json!({
                "bookings": rows.iter().map(bookings::Booking::to_json).collect::<Vec<_>>()
            }))
        };
        respond(listed.await)
    }

    #[tool(
        name = "bookings.create",
        description = "Books a free slot (its start from bookings.slots) for someone: the same rules as the /book page. The owner is told and the person gets an invitation by mail (jobs; not waited for). Answers the booking {id, start, end, name, email, topic, state, notify_job_id, confirmation_job_id}; a slot taken meanwhile is a tool error \"That time was just taken\"."
    )]
    async fn bookings_create(
        &self,
        Parameters(params): Parameters<CreateBookingParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let state = &self.state;
        let created = async {
            bookings::may_book(state.settings.booking, Actor::Agent, true)?;
            let new = NewBooking::parse(
                &params.start,
                &params.name,
                &params.email,
                params.topic.as_deref().unwrap_or_default(),
            )?;
            let booking = bookings::create(
                &state.pool,
                &state.jobs,
                &state.settings.timezone,
                state.settings.calendar_uid_host(),
                &new,
                Actor::Agent,
            )
            .await?;
            Ok::<_, BookingError>(booking.to_json())
        };
        respond(created.await.map_err(AppError::from))
    }

    #[tool(
        name = "bookings.cancel",
        description = "Cancels a booking: both sides get a cancellation by mail (a job). Answers the booking with state cancelled."
    )]
    async fn bookings_cancel(
        &self,
        Parameters(params): Parameters<BookingIdParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let cancelled = async {
            bookings::may_book(self.state.settings.booking, Actor::Agent, true)?;
            bookings::cancel(&self.state.pool, &self.state.jobs, params.id, Actor::Agent).await
        };
        respond(
            cancelled
                .await
                .map(|booking| booking.to_json())
                .map_err(AppError::from),
        )
    }
}

impl Tools {
    /// `bookings.slots`.
    async fn slots(&self, params: SlotsParams) -> Result<Value, AppError> {
        let state = &self.state;
        bookings::may_book(state.settings.booking, Actor::Agent, true)?;
        let days = params.days.unwrap_or(14);
        if !(1..=60).contains(&days) {
            return Err(AppError::BadRequest(format!(
                "days must be from 1 to 60; it was {days}."
            )));
        }
        let from = match params.from.as_deref() {
            Some(text) => bookings::parse_moment("from", text)?,
            None => jiff::Timestamp::now(),
        };
        let until = from
            .checked_add(jiff::SignedDuration::from_hours(24 * days))
            .unwrap_or(jiff::Timestamp::MAX);
        let slots =
            bookings::free_slots(&state.pool, &state.settings.timezone, from, until).await?;
        Ok(json!({
            "slots": slots
                .iter()
                .map(|slot| json!({ "start": slot.start.to_string(), "end": slot.end.to_string() }))
                .collect::<Vec<_>>()
        }))
    }
}
