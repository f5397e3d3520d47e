//! One error type for HTTP handlers. Each variant says which status it becomes; the
//! details of an `Internal` error go to the log, never to the client.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// 400: the request is malformed; the message tells the person what to fix.
    #[error("{0}")]
    BadRequest(String),
    /// 404: no such thing.
    #[error("{0}")]
    NotFound(String),
    /// 409: the thing exists but is not in a state that allows this.
    #[error("{0}")]
    Conflict(String),
    /// 503: a dependency (the database) is not answering right now.
    #[error("{0}")]
    Unavailable(String),
    /// 500: a bug or an unexpected failure. Logged with its cause; the client only
    /// learns that something went wrong.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message a client may see.
    pub fn public_message(&self) -> String {
        match self {
            AppError::Internal(_) => "Something went wrong on our side; it has been logged.".into(),
            other => other.to_string(),
        }
    }
}

impl From<sqlx::Error> for AppError {
    fn from(err: sqlx::Error) -> Self {
        AppError::Internal(anyhow::Error::new(err))
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        if let AppError::Internal(err) = &self {
            tracing::error!(error = format!("{err:#}"), "request failed");
        }
        let body = serde_json::json!({ "error": self.public_message() });
        (self.status(), Json(body)).into_response()
    }
}
