//! Bookings over HTTP, as adapters of `ops::bookings`: visitors see the free slots, book
//! one and cancel with their link (public server functions, rate-limited); admins set
//! the availability, list the bookings and cancel them.

// The module, not the function: the browser's call that #[server] generates for
// `save_availability` does not carry the function's own attributes.
#![allow(
    clippy::too_many_arguments,
    reason = "the availability form posts its ten fields by name, one server function argument each"
)]

use leptos::prelude::*;

use super::FormError;
use leptos::server_fn::codec::GetUrl;

pub use crate::ops::bookings::{
    AvailabilityForm, Booked, BookingOffer, BookingView, BookingsAdminPage, CancelLinkBooking,
    SlotView,
};

/// The free slots and whether this visitor may book one.
#[server(endpoint = "book/page", input = GetUrl)]
pub async fn book_page() -> Result<BookingOffer, ServerFnError> {
    let state = expect_context::<crate::state::AppState>();
    let mut offer = crate::ops::bookings::book_page(&state, &crate::api::visitor().await)
        .await
        .map_err(crate::api::replies::reply)?;
    // Shown once: the booking a plain form post just made (see `book`).
    if let Ok(session) = leptos_axum::extract::<tower_sessions::Session>().await {
        offer.just_booked = session
            .remove::<Booked>(crate::security::guard::SESSION_JUST_BOOKED)
            .await
            .ok()
            .flatten();
    }
    Ok(offer)
}

/// The booking a cancel link names, if the link may still cancel it.
#[server(endpoint = "book/cancel_view", input = GetUrl)]
pub async fn booking_for_cancel_link(
    token: Option<String>,
) -> Result<CancelLinkBooking, ServerFnError> {
    let state = expect_context::<crate::state::AppState>();
    crate::ops::bookings::booking_for_cancel_link(&state, token.unwrap_or_default())
        .await
        .map_err(crate::api::replies::reply)
}

/// Cancels the booking a cancel link names (once).
#[server(endpoint = "book/cancel")]
pub async fn cancel_booking_by_link(token: String) -> Result<String, ServerFnError> {
    let state = expect_context::<crate::state::AppState>();
    let cancelled = crate::ops::bookings::cancel_by_link(&state, token.clone())
        .await
        .map_err(crate::api::replies::reply)?;
    // Posted as plain HTML: the link's page, which now says the booking is cancelled.
    crate::api::replies::after_a_plain_post_show(&format!(
        "/book/cancel?token={}&cancelled",
        percent_encoding::utf8_percent_encode(&token, percent_encoding::NON_ALPHANUMERIC)
    ));
    Ok(cancelled)
}

/// The admin page: availability and bookings.
#[server(endpoint = "bookings/admin", input = GetUrl)]
pub async fn bookings_admin() -> Result<BookingsAdminPage, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::bookings::admin_page(&state, admin)
        .await
        .map_err(crate::api::replies::reply)
}

/// An admin cancels a booking; the cancellation mails are queued.
#[server(endpoint = "bookings/cancel")]
pub async fn cancel_booking(id: i64) -> Result<BookingView, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::bookings::cancel(&state, admin, id)
        .await
        .map(|booking| crate::ops::bookings::view(&state, booking))
        .map_err(crate::api::replies::reply)
}

/// Books `start` (RFC 3339, one of the free slots) for the visitor.
#[server(endpoint = "book")]
pub async fn book(
    start: String,
    name: String,
    email: String,
    topic: String,
) -> Result<Booked, FormError> {
    use crate::api::replies::{after_a_plain_post_show, form_reply, is_plain_form_post};
    let state = expect_context::<crate::state::AppState>();
    let visitor = crate::api::visitor().await;
    let booked = crate::ops::bookings::book(&state, &visitor, start, name, email, topic)
        .await
        .map_err(form_reply)?;
    // Posted as plain HTML (no JavaScript): the booking waits in the session for the
    // page the browser is sent to, which says "Booked" as a call's answer would.
    if is_plain_form_post() {
        let session = leptos_axum::extract::<tower_sessions::Session>()
            .await
            .map_err(form_reply)?;
        session
            .insert(crate::security::guard::SESSION_JUST_BOOKED, &booked)
            .await
            .map_err(form_reply)?;
        after_a_plain_post_show("/book");
    }
    Ok(booked)
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
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::bookings::save_availability(
        &state,
        admin,
        [
            monday, tuesday, wednesday, thursday, friday, saturday, sunday,
        ],
        slot_minutes,
        buffer_minutes,
        days_ahead,
    )
    .await
    .map_err(crate::api::replies::reply)
}
