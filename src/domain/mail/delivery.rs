//! Delivery: the per-recipient throttle and the mail log around every send.

use std::time::Duration;

use sqlx::PgPool;
use time::OffsetDateTime;

use super::{Mail, Mailer, SendError};
use crate::config::MailFrom;
use crate::types::EmailAddress;
use standmeet_jobs::{JobError, JobId};

/// What [`deliver`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Delivery {
    Sent,
    /// The recipient got their share of mail this hour; try again at this time.
    Throttled {
        until: OffsetDateTime,
    },
}

/// Sends `mail` unless its recipient already got `per_hour` mails in the last hour,
/// and logs it. The count and the log entry (`sending`) are made under a lock per
/// recipient, so two jobs mailing one person at once cannot both slip under the limit;
/// the entry becomes `sent` once the mail server took the mail, and is removed again
/// when the send fails. The mail log shows `sent` entries only: a crash during the send
/// leaves a `sending` entry that the throttle counts and nobody is shown.
pub async fn deliver(
    pool: &PgPool,
    mailer: &Mailer,
    from: &MailFrom,
    mail: &Mail,
    job: Option<JobId>,
    per_hour: u32,
) -> Result<Delivery, SendError> {
    if !mailer.is_configured() {
        return Err(SendError::NotConfigured);
    }
    let reserved = reserve(pool, mailer, mail, job, per_hour)
        .await
        .map_err(|err| SendError::Transient(format!("cannot log the mail: {err}")))?;
    let id = match reserved {
        Reservation::Throttled { until } => return Ok(Delivery::Throttled { until }),
        Reservation::Logged(id) => id,
    };
    match mailer.send(from, mail).await {
        Ok(()) => {
            if let Err(err) = sqlx::query!(
                "UPDATE mail_log SET state = 'sent', sent_at = now() WHERE id = $1",
                id
            )
            .execute(pool)
            .await
            {
                // The mail went out all the same: its job must not send it again.
                tracing::warn!(error = %err, "cannot mark a mail that went out as sent in the mail log");
            }
            Ok(Delivery::Sent)
        }
        Err(error) => {
            if let Err(err) = sqlx::query!("DELETE FROM mail_log WHERE id = $1", id)
                .execute(pool)
                .await
            {
                tracing::warn!(error = %err, "cannot take back the log entry of a mail that failed");
            }
            Err(error)
        }
    }
}

enum Reservation {
    Logged(i64),
    Throttled { until: OffsetDateTime },
}

async fn reserve(
    pool: &PgPool,
    mailer: &Mailer,
    mail: &Mail,
    job: Option<JobId>,
    per_hour: u32,
) -> Result<Reservation, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended(lower($1), 7411))",
        mail.to.as_str()
    )
    .execute(&mut *tx)
    .await?;
    let recent = sqlx::query!(
        r#"
        SELECT count(*) AS "count!", min(sent_at) AS oldest
        FROM mail_log
        WHERE lower(recipient) = lower($1) AND sent_at > now() - interval '1 hour'
        "#,
        mail.to.as_str()
    )
    .fetch_one(&mut *tx)
    .await?;
    if recent.count >= i64::from(per_hour) {
        let oldest = recent.oldest.unwrap_or_else(OffsetDateTime::now_utc);
        return Ok(Reservation::Throttled {
            until: oldest + Duration::from_secs(3600),
        });
    }
    let kept = matches!(mailer, Mailer::Log);
    let body = kept.then_some(mail.body.as_str());
    // Kept whatever the supplier: a calendar object carries no secret (a booking's
    // cancel link is in the body), and the admin can see what the visitor got.
    let attachment = mail.calendar.as_ref().map(|calendar| calendar.ics.as_str());
    let id = sqlx::query_scalar!(
        r#"
        INSERT INTO mail_log (recipient, subject, body, attachment, supplier, job_id, state)
        VALUES ($1, $2, $3, $4, $5, $6, 'sending') RETURNING id
        "#,
        mail.to.as_str(),
        mail.subject,
        body,
        attachment,
        mailer.supplier(),
        job.map(|id| id.0),
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Reservation::Logged(id))
}

/// A throttled delivery as a job's answer: run again when allowed, without using up
/// an attempt.
pub fn snooze_until(until: OffsetDateTime, recipient: &EmailAddress) -> JobError {
    let wait = (until - OffsetDateTime::now_utc()).max(time::Duration::seconds(1));
    JobError::snooze(
        Duration::from_secs_f64(wait.as_seconds_f64()),
        format!("{recipient} already got their mails for this hour; this one waits its turn"),
    )
}

/// One entry of the mail log.
#[derive(Clone, Debug)]
pub struct LoggedMail {
    pub id: i64,
    pub recipient: String,
    pub subject: String,
    pub body: Option<String>,
    /// The calendar object that went with it (`invite.ics`), kept like the body.
    pub attachment: Option<String>,
    pub supplier: String,
    pub sent_at: OffsetDateTime,
}

/// Records a mail that went out without a job (the recovery phrase) in the mail log,
/// as [`deliver`] records the others. A mail that went out stays sent even if this
/// fails, so a failure is only logged.
pub async fn log_sent(pool: &PgPool, mailer: &Mailer, mail: &Mail) {
    let body = matches!(mailer, Mailer::Log).then_some(mail.body.as_str());
    if let Err(err) = sqlx::query!(
        "INSERT INTO mail_log (recipient, subject, body, supplier) VALUES ($1, $2, $3, $4)",
        mail.to.as_str(),
        mail.subject,
        body,
        mailer.supplier(),
    )
    .execute(pool)
    .await
    {
        tracing::warn!(error = %err, "cannot record a mail that went out in the mail log");
    }
}

/// The newest mails that went out first, up to `limit`.
pub async fn mail_log_newest(pool: &PgPool, limit: i64) -> Result<Vec<LoggedMail>, sqlx::Error> {
    sqlx::query_as!(
        LoggedMail,
        r#"
        SELECT id, recipient, subject, body, attachment, supplier, sent_at FROM mail_log
        WHERE state = 'sent' ORDER BY id DESC LIMIT $1
        "#,
        limit
    )
    .fetch_all(pool)
    .await
}
