//! Access requests over HTTP: visitors ask (`request_access`) and redeem their code
//! (`redeem_access`), both public and rate-limited; admins list, approve and deny, and
//! read the mail log.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;
use serde::{Deserialize, Serialize};

use super::FormError;
use crate::model::MailState;

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
    /// The calendar invitation or cancellation (`invite.ics`) that went with it.
    pub attachment: Option<String>,
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
    use axum::http::StatusCode;
    use leptos::prelude::*;
    use tower_sessions::Session;

    use super::*;
    use crate::api::auth::require_admin;
    use crate::api::paging::parse_filter;
    use crate::api::replies::{form_reply, reply, set_status};
    use crate::domain::access_requests::{self, NewRequest, RequestRow, RequestStatus};
    use crate::domain::mail;
    use crate::state::AppState;
    use crate::types::EmailAddress;

    use crate::error::AppError;
    use crate::security::guard::SESSION_ACCESS_GRANTED;

    pub async fn request_access(
        name: String,
        email: String,
        message: String,
    ) -> Result<String, FormError> {
        let state = expect_context::<AppState>();
        let request = NewRequest::parse(&name, &email, &message).map_err(|problems| {
            // The one answer with a message per field, so not a plain refusal.
            set_status(StatusCode::BAD_REQUEST);
            FormError {
                message: "Please check the fields marked below.".into(),
                name: problems.name,
                email: problems.email,
                text: problems.message,
            }
        })?;
        if state
            .access_request_limiter
            .check(crate::api::client_address().await, request.email.as_str())
            .is_err()
        {
            return Err(form_reply(AppError::TooManyRequests(
                "Too many requests from here in the last hour. Please try again later.".into(),
            )));
        }
        access_requests::submit(&state.pool, &state.jobs, &request)
            .await
            .map_err(form_reply)?;
        Ok("Request received".into())
    }

    pub async fn redeem_access(email: String, code: String) -> Result<String, FormError> {
        let state = expect_context::<AppState>();
        let address = crate::api::client_address().await;
        // Only wrong codes count (see `GuessLimiter`).
        let Ok(admission) = state.access_code_limiter.admit(address, &email).await else {
            return Err(form_reply(AppError::TooManyRequests(
                "Too many attempts. Wait a minute, then try again.".into(),
            )));
        };
        let Ok(email) = EmailAddress::parse(&email) else {
            return Err(form_reply(AppError::BadRequest(
                "Enter the email address your request was made with.".into(),
            )));
        };
        if code.trim().is_empty() {
            return Err(form_reply(AppError::BadRequest(
                "Enter the access code from the mail.".into(),
            )));
        }
        if !access_requests::code_matches(&state.pool, &email, &code)
            .await
            .map_err(form_reply)?
        {
            admission.failed(email.as_str());
            return Err(form_reply(AppError::Unauthorized(
                "That code does not match this email address. Check both and try again.".into(),
            )));
        }
        let session = leptos_axum::extract::<Session>()
            .await
            .map_err(form_reply)?;
        session.cycle_id().await.map_err(form_reply)?;
        session
            .insert(SESSION_ACCESS_GRANTED, email.as_str())
            .await
            .map_err(form_reply)?;
        admission.succeeded(email.as_str());
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
            created: crate::api::when(row.created_at),
            mail_job_id: row.mail_job_id,
            mail_state,
            mail_job_state: row.mail_job_state,
            mail_note,
        }
    }

    pub async fn list(status: Option<String>) -> Result<Vec<AccessRequestView>, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let status = parse_filter::<RequestStatus>(status.as_deref()).map_err(reply)?;
        let rows = access_requests::list(&state.pool, status, 200)
            .await
            .map_err(reply)?;
        Ok(rows.into_iter().map(view).collect())
    }

    pub async fn approve(id: i64) -> Result<ApproveAnswer, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let job =
            access_requests::approve(&state.pool, &state.jobs, &state.mailer, id, Some(admin.id))
                .await
                .map_err(reply)?;
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
            .map_err(reply)?;
        Ok(format!("Access request {id} denied."))
    }

    pub async fn mail_log() -> Result<Vec<MailLogView>, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let mails = mail::mail_log_newest(&state.pool, 200)
            .await
            .map_err(reply)?;
        Ok(mails
            .into_iter()
            .map(|mail| MailLogView {
                id: mail.id,
                recipient: mail.recipient,
                subject: mail.subject,
                body: mail.body,
                attachment: mail.attachment,
                supplier: mail.supplier,
                sent: crate::api::when(mail.sent_at),
            })
            .collect())
    }
}
