//! Sending mail: the supplier (`STANDMEET_MAIL`: the log, none, or SMTP through
//! lettre), what a failure means for the job that sends (a passing failure retries, a
//! permanent one gives up), the mail log, and the per-recipient throttle.

use std::sync::Arc;
use std::time::Duration;

use lettre::message::Mailbox;
use lettre::transport::smtp::AsyncSmtpTransport;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncTransport, Message, Tokio1Executor};
use sqlx::PgPool;
use time::OffsetDateTime;

use crate::config::MailSupplier;
use crate::domain::types::EmailAddress;
use crate::jobs::{JobError, JobId};

/// How long one SMTP conversation may take before it counts as a passing failure.
const SMTP_TIMEOUT: Duration = Duration::from_secs(10);

/// One mail to send.
#[derive(Clone, Debug)]
pub struct Mail {
    pub to: EmailAddress,
    pub subject: String,
    pub body: String,
}

/// Why a mail did not go out.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SendError {
    #[error("no mail supplier is configured (STANDMEET_MAIL=none)")]
    NotConfigured,
    /// It may work later: a 4xx reply, a refused connection, a timeout.
    #[error("{0}")]
    Transient(String),
    /// It will not work: a 5xx reply (the server's words are in the message).
    #[error("{0}")]
    Permanent(String),
}

impl SendError {
    /// What the mail job should do about it: a passing failure retries, a permanent one
    /// is discarded with the server's reply.
    pub fn into_job_error(self) -> JobError {
        match self {
            SendError::Transient(message) => {
                JobError::retry(format!("the mail server did not take the mail: {message}"))
            }
            SendError::Permanent(message) => {
                JobError::discard(format!("the mail server refused the mail: {message}"))
            }
            SendError::NotConfigured => {
                JobError::discard("no mail supplier is configured (STANDMEET_MAIL=none)")
            }
        }
    }
}

/// Where mail goes.
#[derive(Clone)]
pub enum Mailer {
    /// To the log and the mail log page; nothing leaves the machine.
    Log,
    None,
    Smtp(Arc<AsyncSmtpTransport<Tokio1Executor>>),
}

impl Mailer {
    pub fn from_supplier(supplier: &MailSupplier) -> anyhow::Result<Mailer> {
        Ok(match supplier {
            MailSupplier::Log => Mailer::Log,
            MailSupplier::None => Mailer::None,
            MailSupplier::Smtp(url) => Mailer::Smtp(Arc::new(smtp_transport(url)?)),
        })
    }

    /// Whether mail can be sent at all.
    pub fn is_configured(&self) -> bool {
        !matches!(self, Mailer::None)
    }

    /// The `supplier` column of the mail log.
    pub(crate) fn supplier(&self) -> &'static str {
        match self {
            Mailer::Smtp(_) => "smtp",
            _ => "log",
        }
    }

    /// Sends `mail` from `from`.
    pub async fn send(&self, from: &EmailAddress, mail: &Mail) -> Result<(), SendError> {
        match self {
            Mailer::None => Err(SendError::NotConfigured),
            Mailer::Log => {
                // Never the body: it carries codes, links and recovery phrases, and the
                // process log is read by more people than the admin pages.
                tracing::info!(
                    mail.to = %mail.to,
                    mail.subject = %mail.subject,
                    "mail (the log supplier: not sent; its body is on /admin/mail)"
                );
                Ok(())
            }
            Mailer::Smtp(transport) => {
                let message = build_message(from, mail).map_err(SendError::Permanent)?;
                match transport.send(message).await {
                    Ok(_) => Ok(()),
                    Err(error) if error.is_permanent() => {
                        Err(SendError::Permanent(smtp_reply(&error)))
                    }
                    Err(error) => Err(SendError::Transient(smtp_reply(&error))),
                }
            }
        }
    }
}

fn smtp_transport(url: &url::Url) -> anyhow::Result<AsyncSmtpTransport<Tokio1Executor>> {
    let host = url.host_str().unwrap_or("localhost").to_string();
    let implicit_tls = url.scheme() == "smtps";
    let port = url.port().unwrap_or(if implicit_tls { 465 } else { 25 });
    let tls = TlsParameters::new(host.clone())?;
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&host)
        .port(port)
        .timeout(Some(SMTP_TIMEOUT))
        // smtp://: STARTTLS when the server offers it; smtps://: TLS from the start.
        .tls(if implicit_tls {
            Tls::Wrapper(tls)
        } else {
            Tls::Opportunistic(tls)
        });
    if !url.username().is_empty() {
        let user = percent_decode(url.username());
        let password = percent_decode(url.password().unwrap_or_default());
        builder = builder.credentials(Credentials::new(user, password));
    }
    Ok(builder.build())
}

fn percent_decode(text: &str) -> String {
    url::form_urlencoded::parse(format!("x={text}").as_bytes())
        .next()
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default()
}

fn build_message(from: &EmailAddress, mail: &Mail) -> Result<Message, String> {
    let from: Mailbox = format!("StandMeet <{from}>")
        .parse()
        .map_err(|err| format!("bad sender: {err}"))?;
    let to: Mailbox = mail
        .to
        .as_str()
        .parse()
        .map_err(|err| format!("bad recipient: {err}"))?;
    Message::builder()
        .from(from)
        .to(to)
        .subject(&mail.subject)
        .body(mail.body.clone())
        .map_err(|err| format!("cannot build the mail: {err}"))
}

/// The server's reply (code and words) when there is one, else what went wrong.
fn smtp_reply(error: &lettre::transport::smtp::Error) -> String {
    let text = error.to_string();
    match error.status() {
        Some(code) if !text.contains(&code.to_string()) => format!("{code} {text}"),
        _ => text,
    }
}

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
    from: &EmailAddress,
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
    let body = matches!(mailer, Mailer::Log).then_some(mail.body.as_str());
    let id = sqlx::query_scalar!(
        r#"
        INSERT INTO mail_log (recipient, subject, body, supplier, job_id, state)
        VALUES ($1, $2, $3, $4, $5, 'sending') RETURNING id
        "#,
        mail.to.as_str(),
        mail.subject,
        body,
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
    pub supplier: String,
    pub sent_at: OffsetDateTime,
}

/// The newest mails that went out first, up to `limit`.
pub async fn mail_log_newest(pool: &PgPool, limit: i64) -> Result<Vec<LoggedMail>, sqlx::Error> {
    sqlx::query_as!(
        LoggedMail,
        r#"
        SELECT id, recipient, subject, body, supplier, sent_at FROM mail_log
        WHERE state = 'sent' ORDER BY id DESC LIMIT $1
        "#,
        limit
    )
    .fetch_all(pool)
    .await
}
