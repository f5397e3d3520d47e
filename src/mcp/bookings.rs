//! Bookings as tools: `bookings.availability`, `bookings.slots`, `bookings.list`,
//! `bookings.create`, `bookings.cancel`, over the operations the bookings pages use too
//! (`ops::bookings`).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tools, answer};
use crate::ops::bookings::{AvailabilityChange, BookingAnswer, Window};
use crate::ops::{Operator, bookings as ops};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AvailabilityParams {
    /// The weekly windows, replacing all of them: [{weekday: 1-7 (Monday 1), start:
    /// "HH:MM", end: "HH:MM"}], in the owner's time zone. Unchanged when not given.
    pub windows: Option<Vec<Window>>,
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
        answer(ops::availability(&self.state, Operator::Agent, change).await)
    }

    #[tool(
        name = "bookings.slots",
        description = "The free slots from `from` (now when not given) for `days` days (1-60, 14 when not given), no further than the owner's days ahead: {slots: [{start, end}]} in RFC 3339 (UTC)."
    )]
    async fn bookings_slots(
        &self,
        Parameters(params): Parameters<SlotsParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let from = params.from.as_deref();
        answer(ops::slots(&self.state, Operator::Agent, from, params.days).await)
    }

    #[tool(
        name = "bookings.list",
        description = "Bookings that start in [from, to) (both optional, RFC 3339), soonest first, cancelled ones included: {bookings: [{id, start, end, name, email, topic, state: confirmed|cancelled, notify_job_id, confirmation_job_id}]}."
    )]
    async fn bookings_list(
        &self,
        Parameters(params): Parameters<ListBookingsParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let (from, to) = (params.from.as_deref(), params.to.as_deref());
        answer(ops::list(&self.state, Operator::Agent, from, to).await)
    }

    #[tool(
        name = "bookings.create",
        description = "Books a free slot (its start from bookings.slots) for someone: the same rules as the /book page. The owner is told and the person gets an invitation by mail (jobs; not waited for). Answers the booking {id, start, end, name, email, topic, state, notify_job_id, confirmation_job_id}; a slot taken meanwhile is a tool error \"That time was just taken\"."
    )]
    async fn bookings_create(
        &self,
        Parameters(params): Parameters<CreateBookingParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let topic = params.topic.as_deref().unwrap_or_default();
        let (start, name, email) = (&params.start, &params.name, &params.email);
        answer(ops::create(&self.state, Operator::Agent, start, name, email, topic).await)
    }

    #[tool(
        name = "bookings.cancel",
        description = "Cancels a booking: both sides get a cancellation by mail (a job). Answers the booking with state cancelled."
    )]
    async fn bookings_cancel(
        &self,
        Parameters(params): Parameters<BookingIdParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let cancelled = ops::cancel(&self.state, Operator::Agent, params.id).await;
        answer(cancelled.map(BookingAnswer::from))
    }
}
