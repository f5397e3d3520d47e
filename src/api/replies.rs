//! What every server function does with a refusal or a failure: it becomes an
//! [`AppError`] (the one place that knows statuses), whose status and public message
//! are the answer, so nothing internal reaches the browser.

use axum::http::StatusCode;
use leptos::prelude::*;

use super::form_error::FormError;
use crate::error::AppError;

/// Sets the status of the current server function's answer. A plain form post's answer
/// keeps its redirect's (the form's page, with the error in the address): with a 4xx
/// the browser would show the bare error instead of following it.
pub fn set_status(status: StatusCode) {
    if is_plain_form_post() {
        return;
    }
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(status);
    }
}

/// A server function's answer to `err`: its status, and its message (for an internal
/// error a fixed sentence; the cause goes to the log). See [`AppError`].
pub fn reply(err: impl Into<AppError>) -> ServerFnError {
    let err = err.into();
    set_status(err.status());
    ServerFnError::new(err.public_message())
}

/// [`reply`] for the server functions of visitors' forms, which answer a [`FormError`].
pub fn form_reply(err: impl Into<AppError>) -> FormError {
    let err = err.into();
    set_status(err.status());
    FormError::new(err.public_message())
}

/// Whether this server function's request is a plain HTML form post: the browser ran
/// no script (JavaScript off, or the page not hydrated yet) and asks for a page back.
/// The browser's own calls ask for their encoding (`application/json`) instead.
pub fn is_plain_form_post() -> bool {
    use_context::<axum::http::request::Parts>().is_some_and(|parts| {
        parts
            .headers
            .get(axum::http::header::ACCEPT)
            .and_then(|accept| accept.to_str().ok())
            .is_some_and(|accept| accept.contains("text/html"))
    })
}

/// Sends a plain form post that succeeded to `page` (a `302`, which the browser follows
/// with a GET), where the page says what happened; a script's call gets its answer as
/// before. (A plain post that failed goes back to the form with the error in the
/// address, as Leptos does for every server function: its `ServerAction` reads it.)
pub fn after_a_plain_post_show(page: &str) {
    if is_plain_form_post() {
        leptos_axum::redirect(page);
    }
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

/// Whether an error answer says the arguments did not fit: a `ServerFnError` that
/// server_fn itself made before the function ran (its arguments did not decode: `Args`,
/// `Deserialization`, `MissingArg`), read back with server_fn's own decoder (its public
/// `FromServerFnError::Encoder`, so nothing here knows how it writes them), or a
/// [`FormError`] that says so.
fn arguments_did_not_fit(body: &axum::body::Bytes) -> bool {
    use leptos::server_fn::Decodes;
    use leptos::server_fn::error::FromServerFnError;
    type Encoding = <ServerFnError as FromServerFnError>::Encoder;
    let decoded = <Encoding as Decodes<ServerFnError>>::decode(body.clone());
    if matches!(
        decoded,
        Ok(ServerFnError::Args(_)
            | ServerFnError::Deserialization(_)
            | ServerFnError::MissingArg(_))
    ) {
        return true;
    }
    serde_json::from_slice::<FormError>(body)
        .is_ok_and(|error| error.message.starts_with(super::ARGUMENTS_DO_NOT_FIT))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error answer as server_fn writes it.
    fn answered(err: ServerFnError) -> axum::body::Bytes {
        use leptos::server_fn::error::FromServerFnError;
        err.ser()
    }

    #[test]
    fn argument_errors_are_told_apart_from_failures() {
        for bad_arguments in [
            ServerFnError::Args("invalid digit found in string".into()),
            ServerFnError::Deserialization("expected value".into()),
            ServerFnError::MissingArg("id".into()),
        ] {
            assert!(arguments_did_not_fit(&answered(bad_arguments)));
        }
        let form = serde_json::to_vec(&FormError::new(format!(
            "{}missing field `name`",
            super::super::ARGUMENTS_DO_NOT_FIT
        )))
        .unwrap();
        assert!(arguments_did_not_fit(&form.into()));
        assert!(!arguments_did_not_fit(&answered(ServerFnError::new(
            "StandMeet could not do that just now"
        ))));
        let failure =
            serde_json::to_vec(&FormError::new("StandMeet did not answer; try again.")).unwrap();
        assert!(!arguments_did_not_fit(&failure.into()));
        assert!(!arguments_did_not_fit(&"not an error at all".into()));
    }
}
