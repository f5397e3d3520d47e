//! What every server function does with a refusal or a failure: a refusal gets its
//! status code and a message a person understands; a failure is logged in full and
//! told in short, so nothing internal reaches the browser.

use axum::http::StatusCode;
use leptos::prelude::*;

/// Sets the status of the current server function's answer.
pub fn set_status(status: StatusCode) {
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(status);
    }
}

/// A refusal: `status` and `message`.
pub fn refuse(status: StatusCode, message: impl Into<String>) -> ServerFnError {
    set_status(status);
    ServerFnError::new(message.into())
}

/// A failure on StandMeet's side, while doing `what`.
pub fn internal(what: &str, err: impl std::fmt::Display) -> ServerFnError {
    tracing::error!(error = %err, "{what} failed");
    set_status(StatusCode::INTERNAL_SERVER_ERROR);
    ServerFnError::new("StandMeet could not do that just now; try again.")
}
