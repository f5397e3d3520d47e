//! The three booking mail jobs (queue `mail`, throttled per recipient like every mail):
//! the owner hears of a booking, the visitor gets the invitation with a cancel link
//! (both of the one mail-job shape, `MailJob`), and a cancellation goes to both sides
//! (two mails in one job, each marked as told when it went out). None of them is waited
//! for.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::ics::{self, Meeting, Method};
use super::{Booking, BookingState};
use crate::domain::mail::{Mail, MailContext, MailJob, Wanted};
use crate::domain::secrets::{new_token, token_hash};
use crate::types::EmailAddress;
use standmeet_jobs::{JobContext, JobError, JobKind};

/// The arguments of every booking mail job.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BookingArgs {
    pub booking_id: i64,
}

async fn booking_for_job(job: &JobContext, id: i64) -> Result<Booking, JobError> {
    super::get(job.pool(), id)
        .await?
        .ok_or_else(|| JobError::discard(format!("booking {id} does not exist")))
}

fn visitor_address(booking: &Booking) -> Result<EmailAddress, JobError> {
    EmailAddress::parse(&booking.email)
        .map_err(|err| JobError::discard(format!("the booking's address is not valid: {err}")))
}

/// The booking's time in the owner's zone.
fn when(context: &MailContext, booking: &Booking) -> String {
    super::owner_when(&context.settings.timezone, booking)
}

fn meeting<'a>(booking: &'a Booking, organizer: &'a str, summary: &'a str) -> Meeting<'a> {
    Meeting {
        uid: &booking.uid,
        start: booking.start(),
        end: booking.end(),
        summary,
        description: &booking.topic,
        organizer,
        attendee_name: &booking.name,
        attendee_email: &booking.email,
    }
}

/// The owner's address; the organizer of every meeting.
async fn owner(context: &MailContext, job: &JobContext) -> Result<Option<EmailAddress>, JobError> {
    Ok(crate::domain::owner::owner_email(job.pool(), &context.settings).await?)
}

/// `booking.notify_owner`: tells the owner who booked when, with the event for their
/// own calendar. A booking cancelled before this ran is not announced (its
/// cancellation is).
pub struct NotifyOwner;

impl MailJob for NotifyOwner {
    const KIND: &'static str = "booking.notify_owner";
    type Args = BookingArgs;
    /// The booking, and the owner to tell.
    type About = (Booking, EmailAddress);

    async fn about(
        &self,
        mail: &MailContext,
        job: &JobContext,
        args: &BookingArgs,
    ) -> Result<Wanted<Self::About>, JobError> {
        let booking = booking_for_job(job, args.booking_id).await?;
        if booking.state == BookingState::Cancelled {
            return Ok(Wanted::No("stale".into()));
        }
        let owner = owner(mail, job).await?.ok_or_else(|| {
            JobError::discard("there is no owner to tell: set STANDMEET_OWNER_EMAIL")
        })?;
        Ok(Wanted::Yes((booking, owner)))
    }

    async fn compose(
        &self,
        mail: &MailContext,
        _job: &JobContext,
        (booking, owner): &Self::About,
    ) -> Result<Mail, JobError> {
        let list = mail.link("admin/bookings")?;
        let summary = format!("Meeting with {}", booking.name);
        let mut body = format!(
            "{} <{}> booked a meeting with you:\n\n    {}\n",
            booking.name,
            booking.email,
            when(mail, booking)
        );
        if !booking.topic.is_empty() {
            body.push_str(&format!("\nTopic:\n\n{}\n", booking.topic));
        }
        body.push_str(&format!("\nYour bookings: {list}\n"));
        Ok(Mail {
            to: owner.clone(),
            subject: format!("New booking: {}, {}", booking.name, when(mail, booking)),
            body,
            calendar: Some(ics::calendar(
                &meeting(booking, owner.as_str(), &summary),
                Method::Publish,
                Timestamp::now(),
            )),
        })
    }
}

/// `booking.confirmation`: the visitor's invitation (`METHOD:REQUEST`) with a cancel
/// link. The link's token is minted by the attempt that mails it and only its hash is
/// kept, committed before the send, so every link that may have gone out works. A
/// booking cancelled before this ran gets nothing (`{sent: false, reason: "stale"}`).
pub struct Confirmation;

/// A booking that stands, with its visitor's address, its organizer, and the token of
/// the cancel link its invitation carries.
pub struct Standing {
    booking: Booking,
    to: EmailAddress,
    organizer: EmailAddress,
    token: String,
}

impl MailJob for Confirmation {
    const KIND: &'static str = "booking.confirmation";
    type Args = BookingArgs;
    type About = Standing;

    async fn about(
        &self,
        mail: &MailContext,
        job: &JobContext,
        args: &BookingArgs,
    ) -> Result<Wanted<Standing>, JobError> {
        let booking = booking_for_job(job, args.booking_id).await?;
        if booking.state == BookingState::Cancelled {
            return Ok(Wanted::No("stale".into()));
        }
        let to = visitor_address(&booking)?;
        let organizer = owner(mail, job)
            .await?
            .unwrap_or_else(|| mail.settings.mail_from.address.clone());
        // The link's token, minted only while the booking still stands: a cancel that
        // came in since the check above makes this attempt send nothing after all.
        let token = new_token();
        let minted = sqlx::query!(
            r#"
            INSERT INTO booking_cancel_tokens (token_hash, booking_id)
            SELECT $1, id FROM bookings WHERE id = $2 AND state = 'confirmed'
            "#,
            token_hash(&token),
            booking.id,
        )
        .execute(job.pool())
        .await?;
        if minted.rows_affected() == 0 {
            return Ok(Wanted::No("stale".into()));
        }
        Ok(Wanted::Yes(Standing {
            booking,
            to,
            organizer,
            token,
        }))
    }

    async fn compose(
        &self,
        mail: &MailContext,
        _job: &JobContext,
        standing: &Standing,
    ) -> Result<Mail, JobError> {
        let booking = &standing.booking;
        let mut cancel = mail.link("book/cancel")?;
        cancel
            .query_pairs_mut()
            .append_pair("token", &standing.token);
        let summary = "Meeting with the owner of StandMeet".to_string();
        let mut body = format!(
            "Hello {},\n\nyour meeting is booked:\n\n    {}\n\n\
             The invitation is attached (invite.ics); your calendar shows it in your own time zone.\n",
            booking.name,
            when(mail, booking)
        );
        if !booking.topic.is_empty() {
            body.push_str(&format!("\nTopic: {}\n", booking.topic));
        }
        body.push_str(&format!(
            "\nIf you cannot come, cancel it here (until the meeting starts):\n{cancel}\n"
        ));
        Ok(Mail {
            to: standing.to.clone(),
            subject: format!("Booked: {}", when(mail, booking)),
            body,
            calendar: Some(ics::calendar(
                &meeting(booking, standing.organizer.as_str(), &summary),
                Method::Request,
                Timestamp::now(),
            )),
        })
    }
}

/// What the cancellation job did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CancellationOutput {
    pub sent: bool,
    /// Who was told now (a retry leaves out whom an earlier attempt told).
    pub to: Vec<String>,
}

/// `booking.cancellation`: one job mails both sides a cancellation (`METHOD:CANCEL`,
/// the invitation's UID). Each side is marked as told right after its mail went out, so
/// a retry after the second mail failed does not mail the first side again.
pub struct Cancellation(pub MailContext);

impl JobKind for Cancellation {
    const KIND: &'static str = "booking.cancellation";
    const QUEUE: &'static str = "mail";
    const MAX_ATTEMPTS: i16 = 10;
    type Args = BookingArgs;
    type Output = CancellationOutput;

    async fn run(
        &self,
        job: JobContext,
        args: BookingArgs,
    ) -> Result<CancellationOutput, JobError> {
        let booking = booking_for_job(&job, args.booking_id).await?;
        let told = sqlx::query!(
            r#"
            SELECT owner_told_cancelled_at IS NOT NULL AS "owner!",
                   visitor_told_cancelled_at IS NOT NULL AS "visitor!"
            FROM bookings WHERE id = $1
            "#,
            booking.id
        )
        .fetch_one(job.pool())
        .await?;
        let owner = owner(&self.0, &job).await?;
        let organizer = owner
            .clone()
            .unwrap_or_else(|| self.0.settings.mail_from.address.clone());
        let summary = format!("Cancelled: meeting with {}", booking.name);
        let calendar = ics::calendar(
            &meeting(&booking, organizer.as_str(), &summary),
            Method::Cancel,
            Timestamp::now(),
        );
        let when = when(&self.0, &booking);
        let mut sent = Vec::new();
        if !told.visitor {
            let to = visitor_address(&booking)?;
            let mail = Mail {
                to: to.clone(),
                subject: format!("Cancelled: {when}"),
                body: format!(
                    "Hello {},\n\nthe meeting on {when} is cancelled. The attached cancellation \
                     (invite.ics) removes it from your calendar.\n",
                    booking.name
                ),
                calendar: Some(calendar.clone()),
            };
            self.0.deliver(&job, &mail).await?;
            mark_told(&job, booking.id, "visitor").await?;
            sent.push(to.to_string());
        }
        match owner {
            Some(owner) if !told.owner => {
                let mail = Mail {
                    to: owner.clone(),
                    subject: format!("Cancelled: {}, {when}", booking.name),
                    body: format!(
                        "The meeting with {} <{}> on {when} is cancelled.\n",
                        booking.name, booking.email
                    ),
                    calendar: Some(calendar),
                };
                self.0.deliver(&job, &mail).await?;
                mark_told(&job, booking.id, "owner").await?;
                sent.push(owner.to_string());
            }
            _ => {}
        }
        Ok(CancellationOutput {
            sent: !sent.is_empty(),
            to: sent,
        })
    }
}

async fn mark_told(job: &JobContext, booking_id: i64, side: &str) -> Result<(), JobError> {
    sqlx::query!(
        r#"
        UPDATE bookings
        SET owner_told_cancelled_at = CASE WHEN $2 = 'owner' THEN now() ELSE owner_told_cancelled_at END,
            visitor_told_cancelled_at = CASE WHEN $2 = 'visitor' THEN now() ELSE visitor_told_cancelled_at END
        WHERE id = $1
        "#,
        booking_id,
        side,
    )
    .execute(job.pool())
    .await?;
    Ok(())
}
