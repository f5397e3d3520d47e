//! The supplier (`STANDMEET_MAIL`: the log, none, or SMTP through lettre) and what a
//! failure to send means for the job that sends (a passing failure retries, a permanent
//! one gives up).

use std::sync::Arc;
use std::time::Duration;

use lettre::message::header::{ContentDisposition, ContentType};
use lettre::message::{Mailbox, MultiPart, SinglePart};
use lettre::transport::smtp::AsyncSmtpTransport;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncTransport, Message, Tokio1Executor};

use super::Mail;
use crate::config::{MailFrom, MailSupplier};
use standmeet_jobs::JobError;

/// How long one SMTP conversation may take before it counts as a passing failure.
const SMTP_TIMEOUT: Duration = Duration::from_secs(10);

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
    pub async fn send(&self, from: &MailFrom, mail: &Mail) -> Result<(), SendError> {
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
                // The SMTP conversation, a span of the attempt's trace (when exporting).
                let span = crate::trace_span!(
                    "smtp.send",
                    otel.name = "smtp send",
                    otel.kind = "client",
                    otel.status_code = tracing::field::Empty,
                    otel.status_message = tracing::field::Empty,
                );
                let sent = tracing::Instrument::instrument(transport.send(message), span.clone());
                let answer = match sent.await {
                    Ok(_) => Ok(()),
                    Err(error) if error.is_permanent() => {
                        Err(SendError::Permanent(smtp_reply(&error)))
                    }
                    Err(error) => Err(SendError::Transient(smtp_reply(&error))),
                };
                if let Err(SendError::Permanent(reply) | SendError::Transient(reply)) = &answer {
                    span.record("otel.status_code", "ERROR");
                    span.record("otel.status_message", reply.as_str());
                }
                answer
            }
        }
    }
}

fn smtp_transport(url: &url::Url) -> anyhow::Result<AsyncSmtpTransport<Tokio1Executor>> {
    let host = url.host_str().unwrap_or("localhost").to_string();
    let scheme = url.scheme();
    let implicit_tls = scheme == "smtps";
    let port = url.port().unwrap_or(if implicit_tls { 465 } else { 25 });
    let credentials = (!url.username().is_empty()).then(|| {
        Credentials::new(
            percent_decode(url.username()),
            percent_decode(url.password().unwrap_or_default()),
        )
    });
    let tls = TlsParameters::new(host.clone())?;
    let tls = match scheme {
        // smtps://: TLS from the first byte.
        "smtps" => Tls::Wrapper(tls),
        // smtp+insecure://: plain text, credentials too; the operator asked for it.
        "smtp+insecure" => Tls::None,
        // smtp:// with credentials: STARTTLS or no send, so a password never crosses
        // the network in the clear (a server that offers no STARTTLS gets nothing).
        _ if credentials.is_some() => Tls::Required(tls),
        // smtp:// without: STARTTLS when the server offers it, plain otherwise.
        _ => Tls::Opportunistic(tls),
    };
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&host)
        .port(port)
        .timeout(Some(SMTP_TIMEOUT))
        .tls(tls);
    if let Some(credentials) = credentials {
        builder = builder.credentials(credentials);
    }
    Ok(builder.build())
}

/// A URL's user or password as written before encoding: `%2B` is `+`, and a `+` stays
/// a `+` (this is not a form, where it would be a space).
fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

fn build_message(from: &MailFrom, mail: &Mail) -> Result<Message, String> {
    let address: lettre::Address = from
        .address
        .as_str()
        .parse()
        .map_err(|err| format!("bad sender: {err}"))?;
    let message_id = message_id(&address);
    let from = Mailbox::new(Some(from.name.clone()), address);
    let to: Mailbox = mail
        .to
        .as_str()
        .parse()
        .map_err(|err| format!("bad recipient: {err}"))?;
    let builder = Message::builder()
        .message_id(Some(message_id))
        .from(from)
        .to(to)
        .subject(&mail.subject);
    let built = match &mail.calendar {
        None => builder.body(mail.body.clone()),
        // iMIP (RFC 6047), as calendar programs look for it: the text and, as its
        // alternative, the calendar object with its method (shown as an invitation or a
        // cancellation to accept); the same object again as an attachment, invite.ics.
        Some(calendar) => {
            let inline = ContentType::parse(&format!(
                "text/calendar; method={}; charset=utf-8",
                calendar.method
            ))
            .map_err(|err| format!("bad calendar content type: {err}"))?;
            let file = ContentType::parse("application/ics; name=\"invite.ics\"")
                .map_err(|err| format!("bad calendar content type: {err}"))?;
            builder.multipart(
                MultiPart::mixed()
                    .multipart(
                        MultiPart::alternative()
                            .singlepart(SinglePart::plain(mail.body.clone()))
                            .singlepart(
                                SinglePart::builder()
                                    .header(inline)
                                    .body(calendar.ics.clone()),
                            ),
                    )
                    .singlepart(
                        SinglePart::builder()
                            .header(file)
                            .header(ContentDisposition::attachment("invite.ics"))
                            .body(calendar.ics.clone()),
                    ),
            )
        }
    };
    built.map_err(|err| format!("cannot build the mail: {err}"))
}

/// A `Message-ID` (RFC 5322 §3.6.4) unique to this mail, in the sender's domain:
/// receiving servers score a mail without one as likely spam, and lettre adds one only
/// when asked (then in the machine's host name, which says nothing to the receiver).
fn message_id(sender: &lettre::Address) -> String {
    let unique: u128 = rand::random();
    format!("<{unique:032x}@{}>", sender.domain())
}

/// The server's reply (code and words) when there is one, else what went wrong.
fn smtp_reply(error: &lettre::transport::smtp::Error) -> String {
    let text = error.to_string();
    match error.status() {
        Some(code) if !text.contains(&code.to_string()) => format!("{code} {text}"),
        _ => text,
    }
}
