//! The owner's address, and changing it: a change waits until the new address confirms
//! through a link mailed to it. The link's token is minted by the attempt that mails it
//! (only its hash is kept, committed before the send, so every link that may have gone
//! out works), and a change that was superseded or cancelled before its mail went out
//! never gets a working link; its job completes as `stale` and sends nothing.
//!
//! Also the recovery phrase, which is sent at once, by decision (no job): the owner
//! asked for it now, and the page says what really happened.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use time::OffsetDateTime;

use crate::config::Settings;
use crate::domain::events::{self, NewEvent};
use crate::domain::mail::{self, Mail, MailContext, MailJob, MailKind, MailOutput, Mailer, Wanted};
use crate::domain::secrets::{code_hash, new_code, new_token, token_hash};
use crate::types::EmailAddress;
use standmeet_jobs::{InsertOptions, JobClient, JobContext, JobError, JobId, JobState};

/// A new confirmation mail waits this long before it goes out, so an owner who
/// mistyped and corrects at once sends one mail, to the right address.
pub const CONFIRMATION_DELAY: Duration = Duration::from_secs(3);

/// The owner's address: as changed by the owner, else `STANDMEET_OWNER_EMAIL`, else the
/// first admin's. `None` only before there is any admin.
pub async fn owner_email(
    pool: &PgPool,
    settings: &Settings,
) -> Result<Option<EmailAddress>, sqlx::Error> {
    let changed = sqlx::query_scalar!("SELECT email FROM owner_profile WHERE id = 1")
        .fetch_optional(pool)
        .await?;
    if let Some(email) = changed.and_then(|email| EmailAddress::parse(&email).ok()) {
        return Ok(Some(email));
    }
    if let Some(configured) = &settings.owner_email {
        return Ok(Some(configured.clone()));
    }
    let first_admin = sqlx::query_scalar!("SELECT email FROM admins ORDER BY id LIMIT 1")
        .fetch_optional(pool)
        .await?;
    Ok(first_admin.and_then(|email| EmailAddress::parse(&email).ok()))
}

/// The `email_change_status` enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[sqlx(type_name = "email_change_status", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum ChangeStatus {
    Pending,
    Superseded,
    Cancelled,
    Confirmed,
}

/// The change waiting for confirmation, with its mail job's state.
#[derive(Clone, Debug)]
pub struct PendingChange {
    pub id: i64,
    pub new_email: String,
    pub created_at: OffsetDateTime,
    pub job_id: Option<i64>,
    pub job_state: Option<JobState>,
    pub job_error: Option<String>,
}

pub async fn pending_change(pool: &PgPool) -> Result<Option<PendingChange>, sqlx::Error> {
    sqlx::query_as!(
        PendingChange,
        r#"
        SELECT c.id AS "id!", c.new_email AS "new_email!", c.created_at AS "created_at!", c.pending_email_job_id AS job_id,
               j.state AS "job_state?: JobState", j.last_error AS job_error
        FROM owner_email_changes c LEFT JOIN job_status j ON j.id = c.pending_email_job_id
        WHERE c.status = 'pending'
        "#
    )
    .fetch_optional(pool)
    .await
}

#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error("{0}")]
    BadAddress(String),
    #[error("{0} is already the owner's address.")]
    Same(String),
    #[error(
        "No mail supplier is configured (STANDMEET_MAIL=none), so no confirmation can be sent; nothing was changed."
    )]
    NoMailSupplier,
    #[error("There is no change waiting to be cancelled.")]
    NothingPending,
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

crate::domain::failure::failures_on_our_side!(ChangeError);

/// Asks to change the owner's address to `new_email`: in one transaction any older
/// pending change is superseded, the new one written, and its confirmation mail queued
/// (its job id kept on the change). Answers the job.
#[tracing::instrument(skip(pool, jobs, settings, mailer))]
pub async fn request_change(
    pool: &PgPool,
    jobs: &JobClient,
    settings: &Settings,
    mailer: &Mailer,
    new_email: &str,
    admin_id: i64,
) -> Result<JobId, ChangeError> {
    let new_email = EmailAddress::parse(new_email)
        .map_err(|err| ChangeError::BadAddress(sentence(&err.to_string())))?;
    if !mailer.is_configured() {
        return Err(ChangeError::NoMailSupplier);
    }
    let current = owner_email(pool, settings).await?;
    if current.is_some_and(|current| current.as_str().eq_ignore_ascii_case(new_email.as_str())) {
        return Err(ChangeError::Same(new_email.to_string()));
    }
    let mut tx = pool.begin().await?;
    // One change at a time: two requests at once (a double submit, two admins) queue
    // here instead of meeting at the one-pending index.
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('standmeet.owner_email_change'))")
        .execute(&mut *tx)
        .await?;
    sqlx::query!(
        "UPDATE owner_email_changes SET status = 'superseded', decided_at = now() WHERE status = 'pending'"
    )
    .execute(&mut *tx)
    .await?;
    let id = sqlx::query_scalar!(
        "INSERT INTO owner_email_changes (new_email, requested_by) VALUES ($1, $2) RETURNING id",
        new_email.as_str(),
        admin_id
    )
    .fetch_one(&mut *tx)
    .await?;
    let later = OffsetDateTime::now_utc() + CONFIRMATION_DELAY;
    let job = jobs
        .insert_tx_with::<MailKind<EmailConfirmation>>(
            &mut tx,
            &ChangeArgs { change_id: id },
            InsertOptions {
                scheduled_at: Some(later),
                ..Default::default()
            },
        )
        .await?;
    sqlx::query!(
        "UPDATE owner_email_changes SET pending_email_job_id = $2 WHERE id = $1",
        id,
        job.0
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(job)
}

/// Cancels the pending change: its link (if mailed) stops working.
pub async fn cancel_change(pool: &PgPool, id: i64) -> Result<(), ChangeError> {
    let cancelled = sqlx::query!(
        "UPDATE owner_email_changes SET status = 'cancelled', decided_at = now() WHERE id = $1 AND status = 'pending'",
        id
    )
    .execute(pool)
    .await?;
    if cancelled.rows_affected() == 0 {
        return Err(ChangeError::NothingPending);
    }
    Ok(())
}

/// Why a confirmation link did not work.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfirmError {
    #[error("This confirmation link is not valid. Ask for a new one on the account page.")]
    Unknown,
    #[error("This confirmation link was already used.")]
    Used,
    #[error(
        "This confirmation link is no longer valid: a newer change replaced it, or the change was cancelled."
    )]
    Withdrawn,
    #[error("This confirmation link has expired. Ask for a new one on the account page.")]
    Expired,
}

/// The pending change a link names (locked for this transaction), if the link may
/// still confirm it: known, its change neither confirmed, replaced nor cancelled, and
/// not expired. Answers the change's id and new address.
async fn linked_change(
    tx: &mut sqlx::PgConnection,
    token: &str,
) -> Result<Result<(i64, String), ConfirmError>, sqlx::Error> {
    let change = sqlx::query!(
        r#"
        SELECT c.id, c.new_email, c.status AS "status: ChangeStatus",
               -- The change's own expiry (its latest link's) ends every link of it.
               least(t.expires_at, c.token_expires_at) AS "expires!"
        FROM owner_email_changes c
        LEFT JOIN owner_email_change_tokens t ON t.change_id = c.id AND t.token_hash = $1
        WHERE t.token_hash IS NOT NULL OR c.token_hash = $1
        FOR UPDATE OF c
        "#,
        token_hash(token)
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(change) = change else {
        return Ok(Err(ConfirmError::Unknown));
    };
    match change.status {
        ChangeStatus::Confirmed => return Ok(Err(ConfirmError::Used)),
        ChangeStatus::Superseded | ChangeStatus::Cancelled => {
            return Ok(Err(ConfirmError::Withdrawn));
        }
        ChangeStatus::Pending => {}
    }
    if change.expires < OffsetDateTime::now_utc() {
        return Ok(Err(ConfirmError::Expired));
    }
    Ok(Ok((change.id, change.new_email)))
}

/// What the link would do, changing nothing: the new address it would confirm. The
/// page a confirmation link opens shows this, and a button that [`confirm`]s, so a mail
/// scanner that opens every link confirms nothing.
pub async fn preview(
    pool: &PgPool,
    token: &str,
) -> Result<Result<String, ConfirmError>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let change = linked_change(&mut tx, token).await?;
    tx.rollback().await?;
    Ok(change.map(|(_, new_email)| new_email))
}

/// Applies the change the token belongs to; answers the new address.
pub async fn confirm(
    pool: &PgPool,
    token: &str,
) -> Result<Result<String, ConfirmError>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let (change_id, new_email) = match linked_change(&mut tx, token).await? {
        Ok(change) => change,
        Err(refused) => return Ok(Err(refused)),
    };
    sqlx::query!(
        "UPDATE owner_email_changes SET status = 'confirmed', decided_at = now() WHERE id = $1",
        change_id
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        r#"
        INSERT INTO owner_profile (id, email) VALUES (1, $1)
        ON CONFLICT (id) DO UPDATE SET email = EXCLUDED.email, updated_at = now()
        "#,
        new_email
    )
    .execute(&mut *tx)
    .await?;
    events::record(
        &mut tx,
        &NewEvent::owner_email_changed(change_id, &new_email),
    )
    .await?;
    tx.commit().await?;
    tracing::info!("the owner's address changed after its confirmation");
    Ok(Ok(new_email))
}

fn sentence(text: &str) -> String {
    let mut chars = text.chars();
    let capitalized: String = chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default();
    format!("{capitalized}.")
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChangeArgs {
    pub change_id: i64,
}

/// `owner.email_confirmation`: mails the new address a confirmation link, minting its
/// token as it sends; sends nothing for a change that is no longer pending.
pub struct EmailConfirmation;

/// A pending change of the owner's address, and the token its confirmation link carries.
pub struct ChangeToConfirm {
    change_id: i64,
    to: EmailAddress,
    token: String,
}

impl MailJob for EmailConfirmation {
    const KIND: &'static str = "owner.email_confirmation";
    type Args = ChangeArgs;
    type About = ChangeToConfirm;

    async fn about(
        &self,
        mail: &MailContext,
        job: &JobContext,
        args: &ChangeArgs,
    ) -> Result<Wanted<ChangeToConfirm>, JobError> {
        let change = sqlx::query!(
            r#"SELECT new_email, status AS "status: ChangeStatus" FROM owner_email_changes WHERE id = $1"#,
            args.change_id
        )
        .fetch_optional(job.pool())
        .await?;
        let Some(change) = change.filter(|change| change.status == ChangeStatus::Pending) else {
            return Ok(Wanted::No("stale".into()));
        };
        let to = EmailAddress::parse(&change.new_email)
            .map_err(|err| JobError::discard(format!("the new address is not valid: {err}")))?;
        // The token exists (by hash) before the mail that carries it leaves, so the
        // link works whatever becomes of this attempt after the send; a retry mails a
        // new link, and both work.
        let token = new_token();
        sqlx::query!(
            r#"
            INSERT INTO owner_email_change_tokens (token_hash, change_id, expires_at)
            VALUES ($1, $2, now() + $3 * interval '1 second')
            "#,
            token_hash(&token),
            args.change_id,
            mail.settings.confirm_link_valid.as_secs() as f64,
        )
        .execute(job.pool())
        .await?;
        Ok(Wanted::Yes(ChangeToConfirm {
            change_id: args.change_id,
            to,
            token,
        }))
    }

    async fn compose(
        &self,
        mail: &MailContext,
        _job: &JobContext,
        change: &ChangeToConfirm,
    ) -> Result<Mail, JobError> {
        let hours = mail.settings.confirm_link_valid.as_secs() / 3600;
        let mut link = mail.link("account/confirm-email")?;
        link.query_pairs_mut().append_pair("token", &change.token);
        Ok(Mail {
            to: change.to.clone(),
            subject: "Confirm your new address for StandMeet".into(),
            body: format!(
                "Someone (we hope you) asked StandMeet to send the owner's mail to this address.\n\n\
                 Confirm it by opening this link within {hours} hours:\n\n    {link}\n\n\
                 If you did not ask for this, ignore this mail; nothing changes.\n"
            ),
            calendar: None,
        })
    }

    /// Sent: only now does the change carry the token, and only while it still waits;
    /// in one transaction with the job's own completion.
    async fn after_sending(
        &self,
        mail: &MailContext,
        job: &JobContext,
        change: &ChangeToConfirm,
        mut output: MailOutput,
    ) -> Result<MailOutput, JobError> {
        let mut tx = job.pool().begin().await?;
        let stored = sqlx::query!(
            r#"
            UPDATE owner_email_changes
            SET token_hash = $2, token_expires_at = now() + $3 * interval '1 second', sent_at = now()
            WHERE id = $1 AND status = 'pending'
            "#,
            change.change_id,
            token_hash(&change.token),
            mail.settings.confirm_link_valid.as_secs() as f64,
        )
        .execute(&mut *tx)
        .await?;
        if stored.rows_affected() == 0 {
            // Superseded while the mail was on its way: its link will not work.
            output.reason = Some("stale".into());
        }
        job.complete_tx(&mut tx, &output).await?;
        tx.commit().await?;
        Ok(output)
    }
}

/// The last "Send recovery phrase", as the account page shows it.
#[derive(Clone, Debug)]
pub struct RecoveryAttempt {
    pub recipient: String,
    pub attempted_at: OffsetDateTime,
    pub sent: bool,
    pub error: Option<String>,
}

pub async fn last_recovery(pool: &PgPool) -> Result<Option<RecoveryAttempt>, sqlx::Error> {
    sqlx::query_as!(
        RecoveryAttempt,
        "SELECT recipient, attempted_at, sent, error FROM recovery_sends ORDER BY id DESC LIMIT 1"
    )
    .fetch_optional(pool)
    .await
}

/// Sends a new recovery phrase to the owner now, and records what happened: sent, or
/// the supplier's error. Never claims a send that did not happen.
pub async fn send_recovery_phrase(
    pool: &PgPool,
    settings: &Settings,
    mailer: &Mailer,
) -> anyhow::Result<RecoveryAttempt> {
    let Some(owner) = owner_email(pool, settings).await? else {
        anyhow::bail!("there is no owner address to send to");
    };
    let phrase = new_code();
    let mail = Mail {
        to: owner.clone(),
        subject: "Your StandMeet recovery phrase".into(),
        body: format!(
            "Your recovery phrase:\n\n    {phrase}\n\nKeep it somewhere safe. It replaces any phrase sent before.\n"
        ),
        calendar: None,
    };
    let result = mailer.send(&settings.mail_from, &mail).await;
    let (sent, error, hash) = match &result {
        Ok(()) => (true, None, Some(code_hash(&phrase))),
        Err(err) => (false, Some(err.to_string()), None),
    };
    let attempt = sqlx::query_as!(
        RecoveryAttempt,
        r#"
        INSERT INTO recovery_sends (recipient, sent, error, phrase_hash) VALUES ($1, $2, $3, $4)
        RETURNING recipient, attempted_at, sent, error
        "#,
        owner.as_str(),
        sent,
        error,
        hash,
    )
    .fetch_one(pool)
    .await?;
    if sent {
        mail::log_sent(pool, mailer, &mail).await;
    }
    Ok(attempt)
}
