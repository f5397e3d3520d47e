//! Bookings as tools: `bookings.availability`, `bookings.slots`, `bookings.list`,
//! `bookings.create`, `bookings.cancel`, over the operations the bookings pages use too
//! (`ops::bookings`).

use rmcp::handler::server::wrapper::Json;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Refusal, Tools};
use crate::ops::bookings::{AvailabilityAnswer, BookingList, SlotList};
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
        title = "Read or set the owner's availability",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Sets what it is given of the owner's availability (weekly windows in the owner's time zone, slot length, buffer, days ahead) and answers the whole of it. Call it with no arguments to read it."
    )]
    async fn bookings_availability(
        &self,
        Parameters(params): Parameters<AvailabilityParams>,
    ) -> Result<Json<AvailabilityAnswer>, Refusal> {
        let change = AvailabilityChange {
            windows: params.windows,
            slot_minutes: params.slot_minutes,
            buffer_minutes: params.buffer_minutes,
            days_ahead: params.days_ahead,
        };
        Ok(Json(
            ops::availability(&self.state, Operator::Agent, change).await?,
        ))
    }

    #[tool(
        name = "bookings.slots",
        title = "List free booking slots",
        annotations(read_only_hint = true, open_world_hint = false),
        description = "The free slots from `from` (now when not given) for `days` days (1-60, 14 when not given), no further than the owner's days ahead; times in RFC 3339 (UTC)."
    )]
    async fn bookings_slots(
        &self,
        Parameters(params): Parameters<SlotsParams>,
    ) -> Result<Json<SlotList>, Refusal> {
        let from = params.from.as_deref();
        Ok(Json(
            ops::slots(&self.state, Operator::Agent, from, params.days).await?,
        ))
    }

    #[tool(
        name = "bookings.list",
        title = "List bookings",
        annotations(read_only_hint = true, open_world_hint = false),
        description = "Bookings that start in [from, to) (both optional, RFC 3339), soonest first, cancelled ones included."
    )]
    async fn bookings_list(
        &self,
        Parameters(params): Parameters<ListBookingsParams>,
    ) -> Result<Json<BookingList>, Refusal> {
        let (from, to) = (params.from.as_deref(), params.to.as_deref());
        Ok(Json(
            ops::list(&self.state, Operator::Agent, from, to).await?,
        ))
    }

    #[tool(
        name = "bookings.create",
        title = "Book a slot",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        description = "Books a free slot (its start from bookings.slots) for someone: the same rules as the /book page. The owner is told and the person gets an invitation by mail (jobs; not waited for). Answers the booking; a slot taken meanwhile is a tool error \"That time was just taken\"."
    )]
    async fn bookings_create(
        &self,
        Parameters(params): Parameters<CreateBookingParams>,
    ) -> Result<Json<BookingAnswer>, Refusal> {
        let topic = params.topic.as_deref().unwrap_or_default();
        let (start, name, email) = (&params.start, &params.name, &params.email);
        Ok(Json(
            ops::create(&self.state, Operator::Agent, start, name, email, topic).await?,
        ))
    }

    #[tool(
        name = "bookings.cancel",
        title = "Cancel a booking",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Cancels a booking: both sides get a cancellation by mail (a job). Answers the booking with state cancelled."
    )]
    async fn bookings_cancel(
        &self,
        Parameters(params): Parameters<BookingIdParams>,
    ) -> Result<Json<BookingAnswer>, Refusal> {
        let cancelled = ops::cancel(&self.state, Operator::Agent, params.id).await;
        Ok(Json(cancelled.map(BookingAnswer::from)?))
    }
}
