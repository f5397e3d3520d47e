//! Access requests: a visitor asks, the owner hears of it, an admin approves (a mail
//! with an access code goes out) or denies, and the visitor redeems the code.
//!
//! Business state follows completion: a request is `approved` when an admin said yes
//! and its mail job is queued, and `replied` only in the same transaction that
//! completes that job, after the mail really went out. The access code is minted by the
//! attempt that mails it, and only its hash is kept (`access_codes`, committed before
//! the send): every code that may have gone out works, whichever attempt sent it and
//! whatever became of that attempt afterwards (a failed commit, a time-out after the
//! mail server took the mail, a crash), and none sits in clear in the database.

use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use time::OffsetDateTime;

use crate::domain::events::{self, EventType, NewEvent};
use crate::domain::mail::{Mail, MailContext, MailJob, MailKind, MailOutput, Mailer, Wanted};
use crate::domain::secrets::{code_hash, new_code};
use crate::model::MailState;
use crate::types::{EmailAddress, free_text_problem, name_problem, normalized_line_breaks};
use standmeet_jobs::{JobClient, JobContext, JobError, JobId, JobState};

pub use crate::model::RequestStatus;

/// A visitor's request, as checked at the edge.
#[derive(Clone, Debug)]
pub struct NewRequest {
    pub name: String,
    pub email: EmailAddress,
    pub message: String,
}

/// What is wrong with a submitted form, field by field, in words for the visitor.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormProblems {
    pub name: Option<String>,
    pub email: Option<String>,
    pub message: Option<String>,
}

impl FormProblems {
    pub fn is_empty(&self) -> bool {
        self.name.is_none() && self.email.is_none() && self.message.is_none()
    }
}

impl NewRequest {
    /// Checks the three fields; answers every problem at once.
    pub fn parse(name: &str, email: &str, message: &str) -> Result<NewRequest, FormProblems> {
        let mut problems = FormProblems::default();
        let name = name.trim();
        problems.name = name_problem(name);
        let email = match EmailAddress::parse(email) {
            Ok(email) => Some(email),
            Err(err) => {
                problems.email = Some(format!("{}.", capitalized(&err.to_string())));
                None
            }
        };
        let message = message.trim();
        problems.message = free_text_problem(message, 5000, "A message");
        match email {
            Some(email) if problems.is_empty() => Ok(NewRequest {
                name: name.to_string(),
                email,
                message: normalized_line_breaks(message),
            }),
            _ => Err(problems),
        }
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The newest request's id (0 when there is none): the live hub reads it for the
/// admins' open lists (`crate::live`), so it is one index lookup.
pub async fn newest_id(pool: &PgPool) -> sqlx::Result<i64> {
    let newest = sqlx::query_scalar!("SELECT max(id) FROM access_requests")
        .fetch_one(pool)
        .await?;
    Ok(newest.unwrap_or(0))
}

/// Writes the request and queues the mail that tells the owner, in one transaction.
#[tracing::instrument(skip_all)]
pub async fn submit(pool: &PgPool, jobs: &JobClient, request: &NewRequest) -> anyhow::Result<i64> {
    let mut tx = pool.begin().await?;
    let id = sqlx::query_scalar!(
        "INSERT INTO access_requests (name, email, message) VALUES ($1, $2, $3) RETURNING id",
        request.name,
        request.email.as_str(),
        request.message,
    )
    .fetch_one(&mut *tx)
    .await?;
    let job = jobs
        .insert_tx::<MailKind<NotifyOwner>>(&mut tx, &RequestArgs { request_id: id })
        .await?;
    // The event rides on this statement (the database's `record_event`, as
    // `events::record` calls it): a visitor's request is the commonest change that
    // records one, and a statement of its own would add a round trip to it.
    let created =
        NewEvent::access_request(EventType::AccessRequestCreated, id, request.email.as_str());
    sqlx::query!(
        r#"
        UPDATE access_requests SET notify_job_id = $2 WHERE id = $1
        RETURNING record_event($3, $4, $5, $6) AS "event_id!"
        "#,
        id,
        job.0,
        created.event_type.as_str(),
        created.subject_id,
        created.data,
        crate::telemetry::otel::current_traceparent(),
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    tracing::info!(request.id = id, job.id = job.0, "an access request came in");
    Ok(id)
}

/// A request as the admin page lists it, with its mail job's state.
#[derive(Clone, Debug)]
pub struct RequestRow {
    pub id: i64,
    pub name: String,
    pub email: String,
    pub message: String,
    pub status: RequestStatus,
    pub created_at: OffsetDateTime,
    pub mail_job_id: Option<i64>,
    pub mail_job_state: Option<JobState>,
    pub mail_error: Option<String>,
}

impl RequestRow {
    /// The mail chip: from the mail job's state; once that job is cleaned away, a
    /// replied request was sent.
    pub fn mail_state(&self) -> Option<MailState> {
        match (self.mail_job_state, self.status) {
            (Some(state), _) => Some(MailState::of_job(state)),
            (None, RequestStatus::Replied) => Some(MailState::Sent),
            _ => None,
        }
    }
}

/// The requests nobody decided yet: how many, and how long the oldest has waited.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Waiting {
    pub count: i64,
    pub oldest_age_s: Option<f64>,
}

/// See [`Waiting`]; read through the index by status.
pub async fn waiting(pool: &PgPool) -> Result<Waiting, sqlx::Error> {
    let row = sqlx::query!(
        r#"
        SELECT count(*) AS "count!",
               extract(epoch FROM now() - min(created_at))::float8 AS oldest_age_s
        FROM access_requests WHERE status = 'pending'
        "#
    )
    .fetch_one(pool)
    .await?;
    Ok(Waiting {
        count: row.count,
        oldest_age_s: row.oldest_age_s,
    })
}

/// The newest requests first (optionally of one status), up to `limit`.
pub async fn list(
    pool: &PgPool,
    status: Option<RequestStatus>,
    limit: i64,
) -> Result<Vec<RequestRow>, sqlx::Error> {
    sqlx::query_as!(
        RequestRow,
        r#"
        SELECT r.id, r.name, r.email, r.message, r.status AS "status: RequestStatus", r.created_at,
               r.mail_job_id, j.state AS "mail_job_state?: JobState",
               j.last_error AS mail_error
        FROM access_requests r LEFT JOIN job_status j ON j.id = r.mail_job_id
        WHERE $1::access_request_status IS NULL OR r.status = $1
        ORDER BY r.id DESC
        LIMIT $2
        "#,
        status as Option<RequestStatus>,
        limit,
    )
    .fetch_all(pool)
    .await
}

pub async fn get(pool: &PgPool, id: i64) -> Result<Option<RequestRow>, sqlx::Error> {
    sqlx::query_as!(
        RequestRow,
        r#"
        SELECT r.id, r.name, r.email, r.message, r.status AS "status: RequestStatus", r.created_at,
               r.mail_job_id, j.state AS "mail_job_state?: JobState",
               j.last_error AS mail_error
        FROM access_requests r LEFT JOIN job_status j ON j.id = r.mail_job_id
        WHERE r.id = $1
        "#,
        id,
    )
    .fetch_optional(pool)
    .await
}

/// Why an approval or a denial did not happen.
#[derive(Debug, thiserror::Error)]
pub enum DecisionError {
    #[error("There is no access request {0}.")]
    NotFound(i64),
    #[error("Access request {id} is {status} already; only pending requests can be {verb}.")]
    NotPending {
        id: i64,
        status: &'static str,
        verb: &'static str,
    },
    #[error(
        "No mail supplier is configured (STANDMEET_MAIL=none), so no approval mail can be sent; nothing was changed."
    )]
    NoMailSupplier,
    #[error(
        "Access request {0} is approved already and its mail is on its way; approve it again only if that mail fails."
    )]
    MailOnItsWay(i64),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

crate::domain::failure::failures_on_our_side!(DecisionError);

/// Approves a pending request: in one transaction its status becomes `approved` and
/// the approval mail is queued (its job id kept on the request). Answers that job.
///
/// An approved request whose mail job ended without the mail going out (discarded,
/// cancelled), or was cleaned away, can be approved again: a new mail job is queued,
/// so no request is left approved with nothing on its way.
#[tracing::instrument(skip(pool, jobs, mailer))]
/// `admin_id` is `None` when an agent approved through MCP.
pub async fn approve(
    pool: &PgPool,
    jobs: &JobClient,
    mailer: &Mailer,
    id: i64,
    admin_id: Option<i64>,
) -> Result<JobId, DecisionError> {
    if !mailer.is_configured() {
        return Err(DecisionError::NoMailSupplier);
    }
    let mut tx = pool.begin().await?;
    lock_approvable(&mut tx, id).await?;
    let job = jobs
        .insert_tx::<MailKind<ApprovalMail>>(&mut tx, &RequestArgs { request_id: id })
        .await?;
    let email = sqlx::query_scalar!(
        r#"
        UPDATE access_requests
        SET status = 'approved', decided_at = now(), decided_by = $2, mail_job_id = $3
        WHERE id = $1
        RETURNING email
        "#,
        id,
        admin_id,
        job.0,
    )
    .fetch_one(&mut *tx)
    .await?;
    let approved = NewEvent::access_request(EventType::AccessRequestApproved, id, &email);
    events::record(&mut tx, &approved).await?;
    tx.commit().await?;
    Ok(job)
}

/// Denies a pending request.
#[tracing::instrument(skip(pool))]
pub async fn deny(pool: &PgPool, id: i64, admin_id: Option<i64>) -> Result<(), DecisionError> {
    let mut tx = pool.begin().await?;
    lock_pending(&mut tx, id, "denied").await?;
    let email = sqlx::query_scalar!(
        "UPDATE access_requests SET status = 'denied', decided_at = now(), decided_by = $2 WHERE id = $1 RETURNING email",
        id,
        admin_id
    )
    .fetch_one(&mut *tx)
    .await?;
    let denied = NewEvent::access_request(EventType::AccessRequestDenied, id, &email);
    events::record(&mut tx, &denied).await?;
    tx.commit().await?;
    Ok(())
}

/// Locks request `id` for an approval; fails unless it is pending, or approved with its
/// mail job finished without sending (or gone).
async fn lock_approvable(tx: &mut sqlx::PgConnection, id: i64) -> Result<(), DecisionError> {
    let current = sqlx::query!(
        r#"
        SELECT r.status AS "status: RequestStatus", j.state AS "mail_state?: JobState"
        FROM access_requests r LEFT JOIN job_status j ON j.id = r.mail_job_id
        WHERE r.id = $1 FOR UPDATE OF r
        "#,
        id
    )
    .fetch_optional(&mut *tx)
    .await?;
    match current {
        None => Err(DecisionError::NotFound(id)),
        Some(row) => match (row.status, row.mail_state) {
            (RequestStatus::Pending, _) => Ok(()),
            (RequestStatus::Approved, None | Some(JobState::Discarded | JobState::Cancelled)) => {
                Ok(())
            }
            (RequestStatus::Approved, Some(_)) => Err(DecisionError::MailOnItsWay(id)),
            (other, _) => Err(DecisionError::NotPending {
                id,
                status: other.as_str(),
                verb: "approved",
            }),
        },
    }
}

/// Locks request `id` for a decision; fails unless it is pending.
async fn lock_pending(
    tx: &mut sqlx::PgConnection,
    id: i64,
    verb: &'static str,
) -> Result<(), DecisionError> {
    let status = sqlx::query_scalar!(
        r#"SELECT status AS "status: RequestStatus" FROM access_requests WHERE id = $1 FOR UPDATE"#,
        id
    )
    .fetch_optional(&mut *tx)
    .await?;
    match status {
        None => Err(DecisionError::NotFound(id)),
        Some(RequestStatus::Pending) => Ok(()),
        Some(other) => Err(DecisionError::NotPending {
            id,
            status: other.as_str(),
            verb,
        }),
    }
}

/// Whether `code` is an access code minted for `email`: the one a replied request
/// records, or any other that an attempt of its mail job minted (and so may have mailed).
pub async fn code_matches(
    pool: &PgPool,
    email: &EmailAddress,
    code: &str,
) -> Result<bool, sqlx::Error> {
    let hash = code_hash(code);
    sqlx::query_scalar!(
        r#"
        SELECT EXISTS (
            SELECT FROM access_requests
            WHERE lower(email) = lower($1) AND status = 'replied' AND code_hash = $2
        ) OR EXISTS (
            SELECT FROM access_codes c JOIN access_requests r ON r.id = c.request_id
            WHERE c.code_hash = $2 AND lower(r.email) = lower($1)
              AND r.status IN ('approved', 'replied')
        ) AS "matches!"
        "#,
        email.as_str(),
        hash,
    )
    .fetch_one(pool)
    .await
}

/// The arguments of both access-request mail jobs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RequestArgs {
    pub request_id: i64,
}

/// The request a mail job is about; a request that is gone makes the job pointless.
async fn request_for_job(job: &JobContext, id: i64) -> Result<RequestRow, JobError> {
    get(job.pool(), id)
        .await?
        .ok_or_else(|| JobError::discard(format!("access request {id} does not exist")))
}

/// `access_request.notify_owner`: tells the owner (`STANDMEET_OWNER_EMAIL`, else the
/// first admin) that a request came in.
pub struct NotifyOwner;

impl MailJob for NotifyOwner {
    const KIND: &'static str = "access_request.notify_owner";
    type Args = RequestArgs;
    /// The request, and the owner to tell.
    type About = (RequestRow, EmailAddress);

    async fn about(
        &self,
        mail: &MailContext,
        job: &JobContext,
        args: &RequestArgs,
    ) -> Result<Wanted<Self::About>, JobError> {
        let request = request_for_job(job, args.request_id).await?;
        let owner = crate::domain::owner::owner_email(job.pool(), &mail.settings)
            .await?
            .ok_or_else(|| {
                JobError::discard("there is no owner to tell: set STANDMEET_OWNER_EMAIL")
            })?;
        Ok(Wanted::Yes((request, owner)))
    }

    async fn compose(
        &self,
        mail: &MailContext,
        _job: &JobContext,
        (request, owner): &Self::About,
    ) -> Result<Mail, JobError> {
        let review = mail.link("admin/access-requests")?;
        let mut body = format!("{} <{}> asks for access", request.name, request.email);
        if request.message.is_empty() {
            body.push_str(".\n");
        } else {
            body.push_str(&format!(":\n\n{}\n", request.message));
        }
        body.push_str(&format!("\nApprove or deny it at {review}\n"));
        Ok(Mail {
            to: owner.clone(),
            subject: format!("Access request from {}", request.name),
            body,
            calendar: None,
        })
    }
}

/// `access_request.approval_mail`: mints an access code (its hash committed first, so
/// the code works once mailed, whatever happens next), mails it to the visitor, and
/// then, in one transaction with its own completion, marks the request `replied`.
pub struct ApprovalMail;

/// An approved request, its address, and the code its mail carries.
pub struct Approved {
    request: RequestRow,
    to: EmailAddress,
    code: String,
}

impl MailJob for ApprovalMail {
    const KIND: &'static str = "access_request.approval_mail";
    type Args = RequestArgs;
    type About = Approved;

    async fn about(
        &self,
        _mail: &MailContext,
        job: &JobContext,
        args: &RequestArgs,
    ) -> Result<Wanted<Approved>, JobError> {
        let request = request_for_job(job, args.request_id).await?;
        if request.status != RequestStatus::Approved {
            // Denied meanwhile, or replied by an earlier attempt: nothing to send.
            return Ok(Wanted::No(format!(
                "the request is {} now",
                request.status.as_str()
            )));
        }
        let to = EmailAddress::parse(&request.email).map_err(|err| {
            JobError::discard(format!("the request's address is not valid: {err}"))
        })?;
        let code = new_code();
        sqlx::query!(
            "INSERT INTO access_codes (code_hash, request_id) VALUES ($1, $2)",
            code_hash(&code),
            request.id,
        )
        .execute(job.pool())
        .await?;
        Ok(Wanted::Yes(Approved { request, to, code }))
    }

    async fn compose(
        &self,
        mail: &MailContext,
        _job: &JobContext,
        Approved { request, to, code }: &Approved,
    ) -> Result<Mail, JobError> {
        let redeem = mail.link("access")?;
        Ok(Mail {
            to: to.clone(),
            subject: "Your access to StandMeet".into(),
            body: format!(
                "Hello {},\n\nyour request was approved. Your access code:\n\n    {code}\n\n\
                 Enter it with this email address at {redeem}\n",
                request.name
            ),
            calendar: None,
        })
    }

    /// Sent: the request is `replied`, with its event, in one transaction with the
    /// job's own completion.
    async fn after_sending(
        &self,
        _mail: &MailContext,
        job: &JobContext,
        Approved { request, code, .. }: &Approved,
        output: MailOutput,
    ) -> Result<MailOutput, JobError> {
        let mut tx = job.pool().begin().await?;
        let replied = sqlx::query_scalar!(
            r#"
            UPDATE access_requests
            SET status = 'replied', code_hash = $2, replied_at = now()
            WHERE id = $1 AND status = 'approved'
            RETURNING email
            "#,
            request.id,
            code_hash(code),
        )
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(email) = replied {
            let event =
                NewEvent::access_request(EventType::AccessRequestReplied, request.id, &email);
            events::record(&mut tx, &event).await?;
        }
        job.complete_tx(&mut tx, &output).await?;
        tx.commit().await?;
        Ok(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_grouped_and_hash_the_same_however_typed() {
        let code = new_code();
        assert_eq!(code.len(), 14);
        assert_eq!(code.matches('-').count(), 2);
        assert_ne!(code, new_code());
        let typed = code.to_lowercase().replace('-', " ");
        assert_eq!(code_hash(&code), code_hash(&typed));
        assert_ne!(code_hash(&code), code_hash(&new_code()));
    }

    #[test]
    fn a_request_form_reports_every_problem_at_once() {
        let problems = NewRequest::parse("  ", "not-an-address", &"x".repeat(5001)).unwrap_err();
        assert_eq!(problems.name.as_deref(), Some("Please give your name."));
        assert!(
            problems
                .email
                .as_deref()
                .unwrap()
                .starts_with("An email address has one @")
        );
        assert!(problems.message.is_some());
        let ok = NewRequest::parse(" Ada ", "ada@example.com", " hello ").unwrap();
        assert_eq!(ok.name, "Ada");
        assert_eq!(ok.message, "hello");
    }
}
