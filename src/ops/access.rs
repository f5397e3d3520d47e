//! Access requests: a visitor asks (`request_access`) and redeems the code they were
//! mailed (`redeem_access`); the owner's side lists, approves and denies, and reads the
//! mail log. The page (`api::access`) and the tools `access_requests.*` answer these
//! views.

use serde::{Deserialize, Serialize};

use crate::model::{JobState, MailState, RequestStatus};

/// A request as the page shows it and `access_requests.list` gives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
pub struct AccessRequestView {
    pub id: i64,
    pub name: String,
    pub email: String,
    pub message: String,
    pub status: RequestStatus,
    /// When it was asked: "2026-11-29 14:03:12 UTC".
    pub created: String,
    pub mail_job_id: Option<i64>,
    pub mail_state: Option<MailState>,
    /// The mail job's state, so the page knows which chips can still change.
    pub mail_job_state: Option<JobState>,
    /// Says more about the mail chip: the last error, the next try.
    pub mail_note: Option<String>,
}

/// The requests, newest first (`{"requests": [...]}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
pub struct AccessRequestList {
    pub requests: Vec<AccessRequestView>,
}

/// What an approval did (docs/reference/answers.md): `pending` is false once the mail went
/// out and the request is `replied`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
pub struct ApproveAnswer {
    pub request_id: i64,
    pub status: RequestStatus,
    pub mail_state: MailState,
    pub mail_job_id: i64,
    pub pending: bool,
}

/// One mail as the mail log shows it.
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

/// A visitor's access request that was refused: field by field (the form marks each),
/// or as a whole.
#[cfg(feature = "ssr")]
#[derive(Debug)]
pub enum RequestRefused {
    Fields(crate::domain::access_requests::FormProblems),
    Other(crate::error::AppError),
}

#[cfg(feature = "ssr")]
pub use operations::*;

#[cfg(feature = "ssr")]
mod operations {
    use std::net::IpAddr;
    use std::time::Duration;

    use tower_sessions::Session;

    use super::*;
    use crate::domain::access_requests::{self, NewRequest, RequestRow};
    use crate::domain::mail;
    use crate::domain::waiting;
    use crate::error::AppError;
    use crate::ops::paging::parse_filter;
    use crate::ops::{Operator, when};
    use crate::security::guard::SESSION_ACCESS_GRANTED;
    use crate::state::AppState;
    use crate::types::EmailAddress;
    use standmeet_jobs::WaitOutcome;

    /// The most requests a list gives.
    const LIST_LIMIT: i64 = 200;

    /// A visitor asks for access; answers what to tell them.
    pub async fn request_access(
        state: &AppState,
        visitor: Option<IpAddr>,
        name: &str,
        email: &str,
        message: &str,
    ) -> Result<String, RequestRefused> {
        let request = NewRequest::parse(name, email, message).map_err(RequestRefused::Fields)?;
        if state
            .access_request_limiter
            .check(visitor, request.email.as_str())
            .is_err()
        {
            return Err(RequestRefused::Other(AppError::TooManyRequests(
                "Too many requests from here in the last hour. Please try again later.".into(),
            )));
        }
        access_requests::submit(&state.pool, &state.jobs, &request)
            .await
            .map_err(|err| RequestRefused::Other(err.into()))?;
        Ok("Request received".into())
    }

    /// A visitor redeems the access code they were mailed: their session may then see
    /// restricted entries. Answers what to tell them.
    pub async fn redeem_access(
        state: &AppState,
        visitor: Option<IpAddr>,
        session: &Session,
        email: &str,
        code: &str,
    ) -> Result<String, AppError> {
        // Only wrong codes count (see `GuessLimiter`).
        let Ok(admission) = state.access_code_limiter.admit(visitor, email).await else {
            return Err(AppError::TooManyRequests(
                "Too many attempts. Wait a minute, then try again.".into(),
            ));
        };
        let Ok(email) = EmailAddress::parse(email) else {
            return Err(AppError::BadRequest(
                "Enter the email address your request was made with.".into(),
            ));
        };
        if code.trim().is_empty() {
            return Err(AppError::BadRequest(
                "Enter the access code from the mail.".into(),
            ));
        }
        if !access_requests::code_matches(&state.pool, &email, code).await? {
            admission.failed(email.as_str());
            return Err(AppError::Unauthorized(
                "That code does not match this email address. Check both and try again.".into(),
            ));
        }
        session.cycle_id().await?;
        session
            .insert(SESSION_ACCESS_GRANTED, email.as_str())
            .await?;
        admission.succeeded(email.as_str());
        tracing::info!("a visitor redeemed an access code");
        Ok(crate::model::ACCESS_GRANTED.into())
    }

    fn view(row: RequestRow) -> AccessRequestView {
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
            status: row.status,
            created: when(row.created_at),
            mail_job_id: row.mail_job_id,
            mail_state,
            mail_job_state: row.mail_job_state,
            mail_note,
        }
    }

    /// The newest requests first, optionally of one status (a word of
    /// [`RequestStatus`]; another is a 400 that lists them).
    pub async fn list(
        state: &AppState,
        _by: Operator,
        status: Option<&str>,
    ) -> Result<AccessRequestList, AppError> {
        let status = parse_filter::<RequestStatus>(status)?;
        let rows = access_requests::list(&state.pool, status, LIST_LIMIT).await?;
        Ok(AccessRequestList {
            requests: rows.into_iter().map(view).collect(),
        })
    }

    /// Approves a pending request: the code is issued and its mail queued.
    ///
    /// The console answers at once (its chip follows the mail job live); an agent has
    /// no chip, so it waits up to `STANDMEET_APPROVE_WAIT_MS` for the mail and is told
    /// whether it went out (`pending: false`) or not yet (then `tasks.get` with the
    /// `mail_job_id` tells when).
    pub async fn approve(
        state: &AppState,
        by: Operator,
        id: i64,
    ) -> Result<ApproveAnswer, AppError> {
        let job =
            access_requests::approve(&state.pool, &state.jobs, &state.mailer, id, by.admin_id())
                .await?;
        tracing::info!(request.id = id, job.id = job.0, by = ?by, "an access request was approved");
        let wait = match by {
            Operator::Agent => state.settings.approve_wait,
            Operator::Admin(_) => Duration::ZERO,
        };
        if wait.is_zero() {
            return Ok(ApproveAnswer {
                request_id: id,
                status: RequestStatus::Approved,
                mail_state: MailState::Sending,
                mail_job_id: job.0,
                pending: true,
            });
        }
        let job_state = match waiting::wait(&state.jobs, &[job], wait).await {
            Ok(WaitOutcome::Done(rows)) => rows.first().map(|row| row.state),
            Ok(WaitOutcome::Receipt) | Err(_) => state
                .jobs
                .get(job)
                .await
                .ok()
                .flatten()
                .map(|row| row.state),
        }
        .unwrap_or(JobState::Available);
        let status = access_requests::get(&state.pool, id)
            .await?
            .map_or(RequestStatus::Approved, |row| row.status);
        let mail_state = MailState::of_job(job_state);
        Ok(ApproveAnswer {
            request_id: id,
            status,
            mail_state,
            mail_job_id: job.0,
            pending: !(mail_state == MailState::Sent && status == RequestStatus::Replied),
        })
    }

    /// Denies a pending request; answers what to tell the admin.
    pub async fn deny(state: &AppState, by: Operator, id: i64) -> Result<String, AppError> {
        access_requests::deny(&state.pool, id, by.admin_id()).await?;
        Ok(format!("Access request {id} denied."))
    }

    /// The mail log, newest first.
    pub async fn mail_log(state: &AppState, _by: Operator) -> Result<Vec<MailLogView>, AppError> {
        let mails = mail::mail_log_newest(&state.pool, LIST_LIMIT).await?;
        Ok(mails
            .into_iter()
            .map(|mail| MailLogView {
                id: mail.id,
                recipient: mail.recipient,
                subject: mail.subject,
                body: mail.body,
                attachment: mail.attachment,
                supplier: mail.supplier,
                sent: when(mail.sent_at),
            })
            .collect())
    }
}
