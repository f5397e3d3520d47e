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

/// The most of an error answer [`bad_arguments_are_400`] reads to tell what it is.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Server functions answer 500 when their arguments do not decode (the function never
/// ran): that is the caller's mistake, so such answers become 400, keeping their
/// (encoded) words. Every other answer passes unchanged.
pub async fn bad_arguments_are_400(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let server_function = request.uri().path().starts_with("/api/");
    let response = next.run(request).await;
    if !server_function || response.status() != StatusCode::INTERNAL_SERVER_ERROR {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, ERROR_BODY_LIMIT).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if arguments_did_not_fit(&bytes) {
        parts.status = StatusCode::BAD_REQUEST;
    }
    axum::response::Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// Whether an error answer says the arguments did not fit: server_fn's own encoding
/// (`Args|…`, `Deserialization|…`, `MissingArg|…`) or a [`FormError`] that says so.
///
/// [`FormError`]: super::access::FormError
fn arguments_did_not_fit(body: &[u8]) -> bool {
    const ENCODED: [&[u8]; 3] = [b"Args|", b"Deserialization|", b"MissingArg|"];
    if ENCODED.iter().any(|prefix| body.starts_with(prefix)) {
        return true;
    }
    serde_json::from_slice::<super::access::FormError>(body)
        .is_ok_and(|error| error.message.starts_with(super::ARGUMENTS_DO_NOT_FIT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_errors_are_told_apart_from_failures() {
        assert!(arguments_did_not_fit(b"Args|invalid digit found in string"));
        assert!(arguments_did_not_fit(b"Deserialization|expected value"));
        let form = serde_json::to_vec(&super::super::access::FormError::new(format!(
            "{}missing field `name`",
            super::super::ARGUMENTS_DO_NOT_FIT
        )))
        .unwrap();
        assert!(arguments_did_not_fit(&form));
        assert!(!arguments_did_not_fit(
            b"ServerError|StandMeet could not do that just now"
        ));
        let failure = serde_json::to_vec(&super::super::access::FormError::new(
            "StandMeet did not answer; try again.",
        ))
        .unwrap();
        assert!(!arguments_did_not_fit(&failure));
    }
}
