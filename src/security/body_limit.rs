//! One limit on request bodies for every route (`STANDMEET_MAX_BODY_BYTES`, 2 MiB by
//! default), answered in words: 413 with a message (a JSON-RPC error on `/mcp`, the
//! server function error encoding below `/api/`, `{"error"}` elsewhere).
//!
//! The answer must reach clients that write their whole body before they read (curl,
//! Python, most SDKs). Answering while such a client still writes and then closing the
//! connection makes the kernel reset it, and the client sees a broken pipe instead of
//! the answer. So an oversized body is read to its end and thrown away (up to
//! [`DRAIN_LIMIT`]), and only then answered; a client that asked `Expect:
//! 100-continue` is answered at once, before it sends anything.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

/// The most of an oversized body read (and thrown away) so that its client can read the
/// answer; a client that sends more has its connection closed instead.
pub const DRAIN_LIMIT: u64 = 64 * 1024 * 1024;

/// The limit, as the router's state for [`limit_request_bodies`].
#[derive(Clone, Copy, Debug)]
pub struct BodyLimit(pub usize);

/// Passes every request whose body fits the limit, and answers 413 to the others.
pub async fn limit_request_bodies(
    State(BodyLimit(limit)): State<BodyLimit>,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    let path = request.uri().path().to_owned();
    match declared {
        // hyper holds a body to its declared length: nothing to count.
        Some(length) if length <= limit as u64 => return next.run(request).await,
        Some(length) => {
            let waits_to_send = request
                .headers()
                .get(header::EXPECT)
                .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"100-continue"));
            if waits_to_send {
                // Never told to go on, it sends nothing more; the connection closes all
                // the same, as its body is unread.
                return too_large(&path, limit, true);
            }
            let drained = drain(request.into_body(), length.min(DRAIN_LIMIT)).await;
            return too_large(&path, limit, !drained);
        }
        None => {}
    }
    // No declared length (chunked, or no body at all): read up to the limit.
    let (parts, body) = request.into_parts();
    let mut stream = body.into_data_stream();
    let mut kept = Vec::new();
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else {
            // The client went away mid-body: nobody reads an answer.
            return StatusCode::BAD_REQUEST.into_response();
        };
        if kept.len() + chunk.len() > limit {
            let drained = drain(Body::from_stream(stream), DRAIN_LIMIT).await;
            return too_large(&path, limit, !drained);
        }
        kept.extend_from_slice(&chunk);
    }
    next.run(Request::from_parts(parts, Body::from(kept))).await
}

/// Reads `body` to its end, at most `most` bytes of it; whether it ended.
async fn drain(body: Body, most: u64) -> bool {
    let mut stream = body.into_data_stream();
    let mut read = 0u64;
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else { return false };
        read += chunk.len() as u64;
        if read > most {
            return false;
        }
    }
    true
}

/// The 413 answer for `path`, in the shape its clients read.
fn too_large(path: &str, limit: usize, close: bool) -> Response {
    let message = format!(
        "The request's body is larger than StandMeet takes ({}); send less.",
        size_in_words(limit)
    );
    let mut response = if path == "/mcp" || path.starts_with("/mcp/") {
        let error = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": -32600, "message": message },
        });
        (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(error)).into_response()
    } else if path.starts_with("/api/") {
        use leptos::server_fn::error::{FromServerFnError, ServerFnError};
        let encoded: Bytes = ServerFnError::new(message).ser();
        (StatusCode::PAYLOAD_TOO_LARGE, encoded).into_response()
    } else {
        let error = serde_json::json!({ "error": message });
        (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(error)).into_response()
    };
    if close {
        // The rest of the body is still coming: this connection cannot carry another
        // request.
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// "2 MiB", "512 KiB", "1000 bytes".
pub fn size_in_words(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_said_in_the_unit_they_were_set_in() {
        assert_eq!(size_in_words(2 * 1024 * 1024), "2 MiB");
        assert_eq!(size_in_words(1536 * 1024), "1536 KiB");
        assert_eq!(size_in_words(512 * 1024), "512 KiB");
        assert_eq!(size_in_words(1000), "1000 bytes");
    }
}
