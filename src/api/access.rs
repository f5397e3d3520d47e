//! Access requests over HTTP: visitors ask (`request_access`) and redeem their code
//! (`redeem_access`), both public and rate-limited; admins list, approve and deny, and
//! read the mail log.

use leptos::prelude::*;
use leptos::server_fn::codec::{GetUrl, JsonEncoding};
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

use crate::model::MailState;

/// Why a visitor's form was not taken: a message for the whole form and, where a
/// field is at fault, a message for that field. Sent with a 4xx status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormError {
    pub message: String,
    pub name: Option<String>,
    pub email: Option<String>,
    pub text: Option<String>,
}

impl FormError {
    pub fn new(message: impl Into<String>) -> Self {
        FormError {
            message: message.into(),
            ..Default::default()
        }
    }
}

impl std::fmt::Display for FormError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl FromServerFnError for FormError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            ServerFnErrorErr::ServerError(message) => FormError::new(message),
            ServerFnErrorErr::Args(detail)
            | ServerFnErrorErr::Deserialization(detail)
            | ServerFnErrorErr::MissingArg(detail) => {
                FormError::new(format!("{}{detail}", super::ARGUMENTS_DO_NOT_FIT))
            }
            _ => FormError::new("StandMeet did not answer; try again."),
        }
    }
}

/// A request as the admin page shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessRequestView {
    pub id: i64,
    pub name: String,
    pub email: String,
    pub message: String,
    pub status: String,
    pub created: String,
    pub mail_job_id: Option<i64>,
    pub mail_state: Option<MailState>,
    /// The mail job's state, so the page knows which chips can still change.
    pub mail_job_state: Option<crate::model::JobState>,
    /// Says more about the mail chip: the last error, the next try.
    pub mail_note: Option<String>,
}

/// What an approval did (product.md section 4's shape, without the wait).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApproveAnswer {
    pub request_id: i64,
    pub status: String,
    pub mail_state: MailState,
    pub mail_job_id: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailLogView {
    pub id: i64,
    pub recipient: String,
    pub subject: String,
    pub body: Option<String>,
    pub supplier: String,
    pub sent: String,
}

/// A visitor asks for access; answers what to tell them.
#[server(endpoint = "request_access")]
pub async fn request_access(
    name: String,
    email: String,
    message: String,
) -> Result<String, FormError> {
    server::request_access(name, email, message).await
}

/// A visitor redeems the access code they were mailed; answers what to tell them.
#[server(endpoint = "redeem_access")]
pub async fn redeem_access(email: String, code: String) -> Result<String, FormError> {
    server::redeem_access(email, code).await
}

/// The newest requests first, optionally of one status.
#[server(endpoint = "access_requests/list", input = GetUrl)]
pub async fn list_access_requests(
    status: Option<String>,
) -> Result<Vec<AccessRequestView>, ServerFnError> {
    server::list(status).await
}

/// Approves a pending request; answers at once (the mail is queued).
#[server(endpoint = "access_requests/approve")]
pub async fn approve_access_request(id: i64) -> Result<ApproveAnswer, ServerFnError> {
    server::approve(id).await
}

/// Denies a pending request.
#[server(endpoint = "access_requests/deny")]
pub async fn deny_access_request(id: i64) -> Result<String, ServerFnError> {
    server::deny(id).await
}

/// The mail log, newest first.
#[server(endpoint = "mail_log", input = GetUrl)]
pub async fn mail_log() -> Result<Vec<MailLogView>, ServerFnError> {
    server::mail_log().await
}

#[cfg(feature = "ssr")]
pub(crate) mod server {
    use std::net::SocketAddr;

    use axum::extract::ConnectInfo;
    use axum::http::StatusCode;
    use leptos::prelude::*;
    use tower_sessions::Session;

    use super::*;
    use crate::api::auth::require_admin;
    use crate::api::replies::set_status;
    use crate::domain::access_requests::{
        self, DecisionError, NewRequest, RequestRow, RequestStatus,
    };
    use crate::domain::mail;
    use crate::state::AppState;
    use crate::types::EmailAddress;

    /// The session key that says a visitor redeemed an access code (their email).
    pub const SESSION_ACCESS_GRANTED: &str = "access_granted";

    async fn client_address() -> Option<std::net::IpAddr> {
        leptos_axum::extract::<ConnectInfo<SocketAddr>>()
            .await
            .ok()
            .map(|ConnectInfo(address)| address.ip())
    }

    fn internal(err: impl std::fmt::Display) -> ServerFnError {
        tracing::error!(error = %err, "an access request operation failed");
        ServerFnError::new("StandMeet could not do that just now; try again.")
    }

    /// A refusal with its status code.
    fn refuse(status: StatusCode, error: FormError) -> FormError {
        set_status(status);
        error
    }

    fn failed(err: impl std::fmt::Display) -> FormError {
        tracing::error!(error = %err, "a visitor's request failed");
        FormError::new("StandMeet could not take that just now; try again.")
    }

    pub async fn request_access(
        name: String,
        email: String,
        message: String,
    ) -> Result<String, FormError> {
        let state = expect_context::<AppState>();
        let request = NewRequest::parse(&name, &email, &message).map_err(|problems| {
            refuse(
                StatusCode::BAD_REQUEST,
                FormError {
                    message: "Please check the fields marked below.".into(),
                    name: problems.name,
                    email: problems.email,
                    text: problems.message,
                },
            )
        })?;
        if state
            .access_request_limiter
            .check(client_address().await, request.email.as_str())
            .is_err()
        {
            return Err(refuse(
                StatusCode::TOO_MANY_REQUESTS,
                FormError::new(
                    "Too many requests from here in the last hour. Please try again later.",
                ),
            ));
        }
        access_requests::submit(&state.pool, &request)
            .await
            .map_err(failed)?;
        Ok("Request received".into())
    }

    pub async fn redeem_access(email: String, code: String) -> Result<String, FormError> {
        let state = expect_context::<AppState>();
        if state
            .access_code_limiter
            .check(client_address().await, &email)
            .is_err()
        {
            return Err(refuse(
                StatusCode::TOO_MANY_REQUESTS,
                FormError::new("Too many attempts. Wait a minute, then try again."),
            ));
        }
        let Ok(email) = EmailAddress::parse(&email) else {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                FormError::new("Enter the email address your request was made with."),
            ));
        };
        if code.trim().is_empty() {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                FormError::new("Enter the access code from the mail."),
            ));
        }
        if !access_requests::code_matches(&state.pool, &email, &code)
            .await
            .map_err(failed)?
        {
            return Err(refuse(
                StatusCode::UNAUTHORIZED,
                FormError::new(
                    "That code does not match this email address. Check both and try again.",
                ),
            ));
        }
        let session = leptos_axum::extract::<Session>().await.map_err(failed)?;
        session.cycle_id().await.map_err(failed)?;
        session
            .insert(SESSION_ACCESS_GRANTED, email.as_str())
            .await
            .map_err(failed)?;
        tracing::info!("a visitor redeemed an access code");
        Ok("Access granted. You can now search the restricted entries too.".into())
    }

    pub(crate) fn view(row: RequestRow) -> AccessRequestView {
        let mail_state = row.mail_state();
        let mail_note = match (mail_state, &row.mail_error) {
            (Some(MailState::Failed), Some(error)) => Some(format!("Last error: {error}")),
            (Some(MailState::Sending), Some(error)) => Some(format!("Retrying after: {error}")),
            _ => None,
        };
        AccessRequestView {
            id: row.id,
            name: row.name,
            email: row.email,
            message: row.message,
            status: row.status.as_str().to_string(),
            created: crate::api::tasks::when(row.created_at),
            mail_job_id: row.mail_job_id,
            mail_state,
            mail_job_state: row.mail_job_state,
            mail_note,
        }
    }

    pub async fn list(status: Option<String>) -> Result<Vec<AccessRequestView>, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let status = match status.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
            None => None,
            Some(word) => Some(RequestStatus::parse(word).ok_or_else(|| {
                set_status(StatusCode::BAD_REQUEST);
                ServerFnError::new(format!(
                    "There is no request status {word:?}; the statuses are pending, approved, replied and denied."
                ))
            })?),
        };
        let rows = access_requests::list(&state.pool, status, 200)
            .await
            .map_err(internal)?;
        Ok(rows.into_iter().map(view).collect())
    }

    /// Turns a refused decision into its HTTP status and a message for a person.
    fn refused(error: DecisionError) -> ServerFnError {
        let status = match &error {
            DecisionError::NotFound(_) => StatusCode::NOT_FOUND,
            DecisionError::NotPending { .. } | DecisionError::MailOnItsWay(_) => {
                StatusCode::CONFLICT
            }
            DecisionError::NoMailSupplier => StatusCode::BAD_REQUEST,
            DecisionError::Internal(_) => return internal(error),
        };
        set_status(status);
        ServerFnError::new(error.to_string())
    }

    pub async fn approve(id: i64) -> Result<ApproveAnswer, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let job = access_requests::approve(&state.pool, &state.mailer, id, Some(admin.id))
            .await
            .map_err(refused)?;
        Ok(ApproveAnswer {
            request_id: id,
            status: RequestStatus::Approved.as_str().into(),
            mail_state: MailState::Sending,
            mail_job_id: job.0,
        })
    }

    pub async fn deny(id: i64) -> Result<String, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        access_requests::deny(&state.pool, id, admin.id)
            .await
            .map_err(refused)?;
        Ok(format!("Access request {id} denied."))
    }

    pub async fn mail_log() -> Result<Vec<MailLogView>, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let mails = mail::mail_log_newest(&state.pool, 200)
            .await
            .map_err(internal)?;
        Ok(mails
            .into_iter()
            .map(|mail| MailLogView {
                id: mail.id,
                recipient: mail.recipient,
                subject: mail.subject,
                body: mail.body,
                supplier: mail.supplier,
                sent: crate::api::tasks::when(mail.sent_at),
            })
            .collect())
    }
}
