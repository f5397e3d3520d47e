//! The shape every mail job has: load what the mail is about, stop without sending when
//! that changed meanwhile, compose the mail, deliver it through the throttle and the
//! mail log, and record that it went out. A [`MailJob`] says the parts that differ;
//! [`MailKind`] runs them in that order as a job of queue `mail`.

use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Mail, MailContext, MailOutput};
use standmeet_jobs::{JobContext, JobError, JobKind};

/// Whether the mail is still wanted, once its job runs.
pub enum Wanted<T> {
    /// Yes, about this.
    Yes(T),
    /// No, for this reason (`"stale"`: what the mail was about changed): the job
    /// completes with `{sent: false, reason}`.
    No(String),
}

/// What one kind of mail job says; [`MailKind`] makes it a job.
pub trait MailJob: Send + Sync + 'static {
    /// The job's `kind`.
    const KIND: &'static str;
    type Args: Serialize + DeserializeOwned + Send + Sync + 'static;
    /// What the mail is about, as read when the job runs.
    type About: Send + Sync;

    /// Reads what the mail is about, and whether it is still wanted, and stores what the
    /// mail will carry that must work once sent (a code, a link's token: after the
    /// stale check, before the send). A subject that is gone for good is a discard.
    fn about(
        &self,
        mail: &MailContext,
        job: &JobContext,
        args: &Self::Args,
    ) -> impl Future<Output = Result<Wanted<Self::About>, JobError>> + Send;

    /// The mail, from what [`MailJob::about`] read (and stored: whatever a mail carries
    /// that must work once sent, a code or a link's token, is stored there, before the
    /// send).
    fn compose(
        &self,
        mail: &MailContext,
        job: &JobContext,
        about: &Self::About,
    ) -> impl Future<Output = Result<Mail, JobError>> + Send;

    /// Records that the mail went out (nothing, unless the kind says otherwise), and
    /// answers the job's output; may complete the job in the same transaction as its
    /// own write.
    fn after_sending(
        &self,
        _mail: &MailContext,
        _job: &JobContext,
        _about: &Self::About,
        output: MailOutput,
    ) -> impl Future<Output = Result<MailOutput, JobError>> + Send {
        async move { Ok(output) }
    }
}

/// A [`MailJob`] as a job kind of queue `mail`, with what every mail job needs.
pub struct MailKind<J> {
    job: J,
    mail: MailContext,
}

impl<J: MailJob> MailKind<J> {
    pub fn new(job: J, mail: MailContext) -> Self {
        MailKind { job, mail }
    }
}

impl<J: MailJob> JobKind for MailKind<J> {
    const KIND: &'static str = J::KIND;
    const QUEUE: &'static str = "mail";
    const MAX_ATTEMPTS: i16 = 10;
    type Args = J::Args;
    type Output = MailOutput;

    async fn run(&self, job: JobContext, args: J::Args) -> Result<MailOutput, JobError> {
        let about = match self.job.about(&self.mail, &job, &args).await? {
            Wanted::Yes(about) => about,
            Wanted::No(reason) => return Ok(MailOutput::not_sent(reason)),
        };
        let mail = self.job.compose(&self.mail, &job, &about).await?;
        self.mail.deliver(&job, &mail).await?;
        let sent = MailOutput::sent(&mail.to);
        self.job.after_sending(&self.mail, &job, &about, sent).await
    }
}
