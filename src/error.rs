//! The one error path. Each feature's operations fail with an error in the feature's
//! own words (`CorpusError`, `DecisionError`, …); this file is the one place that says
//! what each of them is to a client: a refusal with a status and a message a person
//! understands, or a failure on our side. The edges turn an [`AppError`] into their
//! answer and nothing else: a server function's reply (`api::replies::reply`), an MCP
//! tool error (`mcp::tool_error`), a fixed endpoint's JSON (`IntoResponse` below). The
//! details of an `Internal` error go to the log, never to the client.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::domain::access_requests::DecisionError;
use crate::domain::bookings::BookingError;
use crate::domain::corpus::CorpusError;
use crate::domain::listings::ListingsError;
use crate::domain::owner::{ChangeError, ConfirmError};
use crate::domain::webhooks::WebhookError;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// 400: the request cannot be done as asked; the message tells the person what to
    /// fix.
    #[error("{0}")]
    BadRequest(String),
    /// 401: the caller did not prove who they are (a code that does not match).
    #[error("{0}")]
    Unauthorized(String),
    /// 403: the caller is known (or need not be) but may not do this here (bookings
    /// closed, or open only to visitors with an access code).
    #[error("{0}")]
    Forbidden(String),
    /// 404: no such thing.
    #[error("{0}")]
    NotFound(String),
    /// 409: the thing exists but is not in a state that allows this.
    #[error("{0}")]
    Conflict(String),
    /// 410: it existed, and cannot be used any more (a used or expired link).
    #[error("{0}")]
    Gone(String),
    /// 429: too many attempts in a while; the message says when to try again.
    #[error("{0}")]
    TooManyRequests(String),
    /// 500: a bug or an unexpected failure (the database did not answer, …). Logged with
    /// its cause; the client only learns that something went wrong.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// What a client is told instead of an internal error.
pub const INTERNAL_MESSAGE: &str = "StandMeet could not do that just now; try again.";

/// What a person is told when a request holds text PostgreSQL cannot store.
pub const UNSTORABLE_TEXT_MESSAGE: &str =
    "The request holds a character StandMeet cannot store (NUL, U+0000); remove it and try again.";

/// Whether `err` is PostgreSQL refusing text it cannot store: a NUL in text
/// (`22021`, "invalid byte sequence for encoding UTF8: 0x00") or `\u0000` in JSON
/// (`22P05`, "unsupported Unicode escape sequence"). Such text came from the request
/// (a form field, a tool's argument, a query string), so it is the caller's to fix:
/// recognised here once, wherever it was written, instead of field by field.
fn is_unstorable_text(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<sqlx::Error>()
            .and_then(|err| err.as_database_error())
            .and_then(|db| db.code())
            .is_some_and(|code| matches!(code.as_ref(), "22021" | "22P05"))
    })
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::Internal(err) if is_unstorable_text(err) => StatusCode::BAD_REQUEST,
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::Gone(_) => StatusCode::GONE,
            AppError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message a client may see. For an internal error this logs the cause (once,
    /// here, so every edge logs it the same way) and answers a fixed sentence.
    pub fn public_message(&self) -> String {
        match self {
            AppError::Internal(err) if is_unstorable_text(err) => {
                tracing::info!(
                    error = crate::causes::error_chain(err.as_ref()),
                    "refused text that cannot be stored"
                );
                UNSTORABLE_TEXT_MESSAGE.into()
            }
            AppError::Internal(err) => {
                tracing::error!(
                    error = crate::causes::error_chain(err.as_ref()),
                    "a request failed"
                );
                INTERNAL_MESSAGE.into()
            }
            other => other.to_string(),
        }
    }
}

impl From<sqlx::Error> for AppError {
    fn from(err: sqlx::Error) -> Self {
        // The app's own statements never wait for a lock with a timeout: only the
        // engine's job actions do, and they answer `standmeet_jobs::Error::Busy`.
        AppError::Internal(err.into())
    }
}

/// What a person is told when a job stays locked by a worker that does not answer.
pub const JOB_HELD_MESSAGE: &str = "This job is held by a worker that is not answering right now. The engine takes it back within its lease (30 s by default); try again in a few seconds.";

impl From<tower_sessions::session::Error> for AppError {
    fn from(err: tower_sessions::session::Error) -> Self {
        AppError::Internal(err.into())
    }
}

/// A part of the request a server function needs (its session) could not be read: the
/// server is set up wrong, not the caller.
impl From<leptos::server_fn::error::ServerFnErrorErr> for AppError {
    fn from(err: leptos::server_fn::error::ServerFnErrorErr) -> Self {
        AppError::Internal(anyhow::anyhow!("cannot read a part of the request: {err}"))
    }
}

/// The job engine's one error: its words for what was not found or refused are meant
/// for a person; a busy row is the held job of [`JOB_HELD_MESSAGE`].
impl From<standmeet_jobs::Error> for AppError {
    fn from(err: standmeet_jobs::Error) -> Self {
        use standmeet_jobs::Error;
        match err {
            Error::NotFound(words) => AppError::NotFound(words),
            Error::Refused(words) => AppError::BadRequest(words),
            Error::Busy(_) => AppError::Conflict(JOB_HELD_MESSAGE.into()),
            // Text PostgreSQL cannot store in a job's arguments is the caller's (see
            // `is_unstorable_text`, which looks through the chain).
            other => AppError::Internal(other.into()),
        }
    }
}

impl From<CorpusError> for AppError {
    fn from(err: CorpusError) -> Self {
        match err {
            CorpusError::Invalid(_) => AppError::BadRequest(err.to_string()),
            CorpusError::NotFound(_) | CorpusError::NotARebuild(_) => {
                AppError::NotFound(err.to_string())
            }
            CorpusError::NoVault => AppError::BadRequest(err.to_string()),
            CorpusError::RebuildFailed { .. } | CorpusError::MadeFromNote { .. } => {
                AppError::Conflict(err.to_string())
            }
            CorpusError::Internal(err) => AppError::Internal(err),
        }
    }
}

impl From<ListingsError> for AppError {
    fn from(err: ListingsError) -> Self {
        match err {
            ListingsError::UnknownSource(_) => AppError::NotFound(err.to_string()),
            ListingsError::Invalid(_)
            | ListingsError::Disabled { .. }
            | ListingsError::NoSources => AppError::BadRequest(err.to_string()),
            ListingsError::Internal(err) => AppError::Internal(err),
        }
    }
}

impl From<DecisionError> for AppError {
    fn from(err: DecisionError) -> Self {
        match err {
            DecisionError::NotFound(_) => AppError::NotFound(err.to_string()),
            DecisionError::NotPending { .. } | DecisionError::MailOnItsWay(_) => {
                AppError::Conflict(err.to_string())
            }
            DecisionError::NoMailSupplier => AppError::BadRequest(err.to_string()),
            DecisionError::Internal(err) => AppError::Internal(err),
        }
    }
}

impl From<ChangeError> for AppError {
    fn from(err: ChangeError) -> Self {
        match err {
            ChangeError::BadAddress(_) | ChangeError::Same(_) | ChangeError::NoMailSupplier => {
                AppError::BadRequest(err.to_string())
            }
            ChangeError::NothingPending => AppError::Conflict(err.to_string()),
            ChangeError::Internal(err) => AppError::Internal(err),
        }
    }
}

impl From<ConfirmError> for AppError {
    fn from(err: ConfirmError) -> Self {
        match err {
            ConfirmError::Unknown => AppError::NotFound(err.to_string()),
            ConfirmError::Used | ConfirmError::Withdrawn | ConfirmError::Expired => {
                AppError::Gone(err.to_string())
            }
        }
    }
}

impl From<WebhookError> for AppError {
    fn from(err: WebhookError) -> Self {
        match err {
            WebhookError::Invalid(_) => AppError::BadRequest(err.to_string()),
            WebhookError::UnknownEndpoint(_) | WebhookError::UnknownDelivery(_) => {
                AppError::NotFound(err.to_string())
            }
            WebhookError::Conflict(_) => AppError::Conflict(err.to_string()),
            WebhookError::Internal(err) => AppError::Internal(err),
        }
    }
}

impl From<BookingError> for AppError {
    fn from(err: BookingError) -> Self {
        match err {
            BookingError::Closed | BookingError::NeedsAccess => {
                AppError::Forbidden(err.to_string())
            }
            BookingError::Invalid(_) => AppError::BadRequest(err.to_string()),
            BookingError::Taken | BookingError::AlreadyCancelled(_) => {
                AppError::Conflict(err.to_string())
            }
            BookingError::NotFound(_) | BookingError::UnknownLink => {
                AppError::NotFound(err.to_string())
            }
            BookingError::LinkUsed | BookingError::Started => AppError::Gone(err.to_string()),
            BookingError::Internal(err) => AppError::Internal(err),
        }
    }
}

impl From<crate::domain::front_page::FrontPageError> for AppError {
    fn from(err: crate::domain::front_page::FrontPageError) -> Self {
        AppError::BadRequest(err.to_string())
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.public_message() });
        (self.status(), Json(body)).into_response()
    }
}
