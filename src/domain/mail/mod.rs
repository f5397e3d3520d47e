//! Mail: what every mail job shares. A mail job has one shape ([`MailJob`], run by
//! [`MailKind`]: load what it is about, stop when that changed, compose, deliver,
//! record). [`MailContext::deliver`] sends one mail for a job through the throttle and
//! the mail log and turns a full hour into a snooze; the supplier (log, none, SMTP) is
//! in `mailer`, the throttle and the log in `delivery`.

mod delivery;
mod job;
mod mailer;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use delivery::{Delivery, LoggedMail, deliver, log_sent, mail_log_newest, snooze_until};
pub use job::{MailJob, MailKind, Wanted};
pub use mailer::{Mailer, SendError};

use crate::config::Settings;
use crate::types::EmailAddress;
use standmeet_jobs::{JobContext, JobError};

/// One mail to send.
#[derive(Clone, Debug)]
pub struct Mail {
    pub to: EmailAddress,
    pub subject: String,
    pub body: String,
    /// A calendar invitation or cancellation that goes with it (bookings).
    pub calendar: Option<CalendarPart>,
}

/// An iCalendar object (RFC 5545) sent beside a mail's text, as calendar programs
/// expect it (iMIP, RFC 6047): `text/calendar; method=…`, also offered as `invite.ics`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalendarPart {
    /// `REQUEST`, `CANCEL` or `PUBLISH`: the same as the object's own `METHOD`.
    pub method: &'static str,
    pub ics: String,
}

/// What a mail job did: its output, the same shape for every mail job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MailOutput {
    pub sent: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl MailOutput {
    /// The mail went out to `to`.
    pub fn sent(to: &EmailAddress) -> Self {
        MailOutput {
            sent: true,
            to: Some(to.to_string()),
            reason: None,
        }
    }

    /// Nothing was sent, for `reason` (`"stale"`: what the mail was about changed).
    pub fn not_sent(reason: impl Into<String>) -> Self {
        MailOutput {
            sent: false,
            to: None,
            reason: Some(reason.into()),
        }
    }
}

/// What the mail jobs need to send.
#[derive(Clone)]
pub struct MailContext {
    pub mailer: Mailer,
    pub settings: Arc<Settings>,
}

impl MailContext {
    /// Sends `mail` for `job`: logged, throttled per recipient; a recipient who had
    /// their share this hour makes the job snooze until it is their turn (no attempt
    /// used), a failure becomes the job's retry or discard.
    pub async fn deliver(&self, job: &JobContext, mail: &Mail) -> Result<(), JobError> {
        let delivered = deliver(
            job.pool(),
            &self.mailer,
            &self.settings.mail_from,
            mail,
            Some(job.id),
            self.settings.mail_per_recipient_per_hour,
        )
        .await
        .map_err(SendError::into_job_error)?;
        match delivered {
            Delivery::Sent => Ok(()),
            Delivery::Throttled { until } => Err(snooze_until(until, &mail.to)),
        }
    }

    /// The address of `path` under the public URL, for a link in a mail. A link that
    /// cannot be made (a public URL that takes no path) discards the job: a mail with a
    /// broken link helps nobody.
    pub fn link(&self, path: &str) -> Result<url::Url, JobError> {
        self.settings.public_url.join(path).map_err(|err| {
            JobError::discard(format!(
                "cannot make the link to {path} from STANDMEET_PUBLIC_URL: {err}"
            ))
        })
    }
}
