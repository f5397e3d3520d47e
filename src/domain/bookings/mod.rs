//! Bookings: the owner publishes when they are free (weekly windows in
//! `STANDMEET_TIMEZONE`), a visitor picks a slot, and mails go out to both sides as jobs
//! that nobody waits for (docs/bookings.md).
//!
//! A booking is one transaction: the row (`confirmed`), a `booking.notify_owner` and a
//! `booking.confirmation` job and the `booking.created` event. The database itself keeps
//! two confirmed bookings apart (an exclusion constraint over the booked time plus its
//! buffer), so of two visitors racing for one slot exactly one gets it and the other is
//! told [`BookingError::Taken`] with nothing written. Cancelling (by the visitor's link,
//! by an admin, by an agent) is one transaction too: `cancelled`, a
//! `booking.cancellation` job (a cancellation mailed to both sides) and the
//! `booking.cancelled` event; a confirmation whose booking was cancelled before it ran
//! sends nothing.

pub mod availability;
pub mod ics;
mod mail;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use sqlx::PgPool;
use time::OffsetDateTime;

pub use availability::{Availability, Slot, WEEKDAYS, Window};
pub use mail::{BookingArgs, Cancellation, Confirmation, NotifyOwner};

use crate::config::BookingMode;
use crate::domain::events::{self, EventType, NewEvent};
use crate::domain::mail::MailKind;
use crate::domain::secrets::token_hash;
use crate::model::MailState;
use crate::types::{EmailAddress, free_text_problem, name_problem, normalized_line_breaks};
use standmeet_jobs::{JobClient, JobState};

/// Why a booking operation did not happen, in words for the person who asked.
#[derive(Debug, thiserror::Error)]
pub enum BookingError {
    #[error("Bookings are closed.")]
    Closed,
    #[error(
        "Booking a meeting needs an access code: enter yours on the \"Enter a code\" page first (or request access)."
    )]
    NeedsAccess,
    #[error("{0}")]
    Invalid(String),
    #[error("That time was just taken. Please pick another one.")]
    Taken,
    #[error("There is no booking {0}.")]
    NotFound(i64),
    #[error("Booking {0} is cancelled already.")]
    AlreadyCancelled(i64),
    #[error("This cancel link is not known. Check that the whole link from the mail was used.")]
    UnknownLink,
    #[error("This booking is cancelled already.")]
    LinkUsed,
    #[error("This meeting has started, so it can no longer be cancelled with this link.")]
    Started,
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

crate::domain::failure::failures_on_our_side!(BookingError);

pub use crate::model::BookingState;

/// Who booked or cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Actor {
    Visitor,
    Admin,
    Agent,
}

impl Actor {
    fn as_str(self) -> &'static str {
        match self {
            Actor::Visitor => "visitor",
            Actor::Admin => "admin",
            Actor::Agent => "agent",
        }
    }
}

/// A booking, with the state of the owner's notification.
#[derive(Clone, Debug)]
pub struct Booking {
    pub id: i64,
    pub uid: String,
    pub starts_at: OffsetDateTime,
    pub ends_at: OffsetDateTime,
    pub name: String,
    pub email: String,
    pub topic: String,
    pub state: BookingState,
    pub created_at: OffsetDateTime,
    pub cancelled_at: Option<OffsetDateTime>,
    pub notify_job_id: Option<i64>,
    pub confirmation_job_id: Option<i64>,
    pub cancellation_job_id: Option<i64>,
    pub notify_job_state: Option<JobState>,
    pub notify_error: Option<String>,
}

impl Booking {
    pub fn start(&self) -> Timestamp {
        timestamp(self.starts_at)
    }

    pub fn end(&self) -> Timestamp {
        timestamp(self.ends_at)
    }

    /// The owner's notification chip, from its job's state (none once the job was
    /// cleaned away).
    pub fn notify_mail_state(&self) -> Option<MailState> {
        self.notify_job_state.map(MailState::of_job)
    }
}

/// `time`'s moment as jiff's (the database speaks `time`, the calendar jiff).
pub fn timestamp(at: OffsetDateTime) -> Timestamp {
    Timestamp::from_nanosecond(at.unix_timestamp_nanos()).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// jiff's moment as `time`'s.
pub fn offset_date_time(at: Timestamp) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(at.as_nanosecond())
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// A moment as an RFC 3339 text a person or a tool gave: `2026-12-07T09:00:00Z` or with
/// an offset (`…+01:00`).
pub fn parse_moment(field: &str, text: &str) -> Result<Timestamp, BookingError> {
    text.trim().parse::<Timestamp>().map_err(|_| {
        BookingError::Invalid(format!(
            "{field} must be a date and time with its offset (RFC 3339), such as 2026-12-07T09:00:00Z; it was {:?}.",
            text.chars().take(60).collect::<String>()
        ))
    })
}

/// A moment in the owner's zone, as mails and the admin page show it:
/// "Monday 7 December 2026, 09:00".
pub fn owner_time(tz: &TimeZone, at: Timestamp) -> String {
    at.to_zoned_datetime(tz.clone())
        .strftime("%A %-d %B %Y, %H:%M")
        .to_string()
}

/// A booking's time in the owner's zone, as mails and pages show it:
/// "Monday 7 December 2026, 09:00–09:30 (Europe/Berlin)".
pub fn owner_when(tz: &TimeZone, booking: &Booking) -> String {
    let end = booking
        .end()
        .to_zoned_datetime(tz.clone())
        .strftime("%H:%M")
        .to_string();
    format!(
        "{}–{end} ({})",
        owner_time(tz, booking.start()),
        zone_name(tz)
    )
}

/// The zone's name as people know it ("Europe/Berlin", "UTC").
pub fn zone_name(tz: &TimeZone) -> String {
    tz.iana_name().unwrap_or("UTC").to_string()
}

/// The availability as the owner set it.
pub async fn availability(pool: &PgPool) -> Result<Availability, BookingError> {
    let row = sqlx::query!(
        "SELECT windows, slot_minutes, buffer_minutes, days_ahead FROM booking_availability"
    )
    .fetch_one(pool)
    .await?;
    let windows: Vec<Window> = serde_json::from_value(row.windows)
        .map_err(|err| BookingError::Internal(anyhow::anyhow!("stored windows: {err}")))?;
    Ok(Availability {
        windows,
        slot_minutes: row.slot_minutes,
        buffer_minutes: row.buffer_minutes,
        days_ahead: row.days_ahead,
    })
}

/// What an owner changes in the availability; what is `None` stays.
#[derive(Clone, Debug, Default)]
pub struct AvailabilityChange {
    pub windows: Option<Vec<Window>>,
    pub slot_minutes: Option<i32>,
    pub buffer_minutes: Option<i32>,
    pub days_ahead: Option<i32>,
}

/// Applies `change` if the whole result is valid (else every problem, and nothing
/// changed); answers the availability as it is now. Bookings already made stay.
pub async fn set_availability(
    pool: &PgPool,
    change: AvailabilityChange,
) -> Result<Availability, BookingError> {
    let mut tx = pool.begin().await?;
    let current = sqlx::query!(
        "SELECT windows, slot_minutes, buffer_minutes, days_ahead FROM booking_availability FOR UPDATE"
    )
    .fetch_one(&mut *tx)
    .await?;
    let windows = match change.windows {
        Some(windows) => windows,
        None => serde_json::from_value(current.windows)
            .map_err(|err| BookingError::Internal(anyhow::anyhow!("stored windows: {err}")))?,
    };
    let checked = Availability::checked(
        windows,
        change.slot_minutes.unwrap_or(current.slot_minutes),
        change.buffer_minutes.unwrap_or(current.buffer_minutes),
        change.days_ahead.unwrap_or(current.days_ahead),
    )
    .map_err(|problems| BookingError::Invalid(problems.join(" ")))?;
    let windows =
        serde_json::to_value(&checked.windows).map_err(|err| BookingError::Internal(err.into()))?;
    sqlx::query!(
        r#"
        UPDATE booking_availability
        SET windows = $1, slot_minutes = $2, buffer_minutes = $3, days_ahead = $4, updated_at = now()
        WHERE (windows, slot_minutes, buffer_minutes, days_ahead) IS DISTINCT FROM ($1, $2, $3, $4)
        "#,
        windows,
        checked.slot_minutes,
        checked.buffer_minutes,
        checked.days_ahead,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(checked)
}

/// The free slots that start in `[from, until)` (no further than the horizon).
pub async fn free_slots(
    pool: &PgPool,
    tz: &TimeZone,
    from: Timestamp,
    until: Timestamp,
) -> Result<Vec<Slot>, BookingError> {
    let owner = availability(pool).await?;
    let now = Timestamp::now();
    let horizon = owner.horizon(tz, now);
    let until = until.min(horizon);
    if until <= from {
        return Ok(Vec::new());
    }
    // A slot that starts at `from` ends (with its buffer) at most a day later.
    let busy = sqlx::query!(
        r#"
        SELECT starts_at, blocked_until FROM bookings
        WHERE state = 'confirmed' AND starts_at < $2 AND blocked_until > $1
        "#,
        offset_date_time(
            from.checked_sub(jiff::SignedDuration::from_hours(24))
                .unwrap_or(from)
        ),
        offset_date_time(
            until
                .checked_add(jiff::SignedDuration::from_hours(24))
                .unwrap_or(until)
        ),
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|row| (timestamp(row.starts_at), timestamp(row.blocked_until)))
    .collect::<Vec<_>>();
    Ok(owner.free_slots(tz, now, from, until, &busy))
}

/// A booking as asked for, checked at the edge.
#[derive(Clone, Debug)]
pub struct NewBooking {
    pub start: Timestamp,
    pub name: String,
    pub email: EmailAddress,
    pub topic: String,
}

impl NewBooking {
    /// Checks the fields a visitor (or an agent) gave; every problem at once.
    pub fn parse(
        start: &str,
        name: &str,
        email: &str,
        topic: &str,
    ) -> Result<NewBooking, BookingError> {
        let mut problems = Vec::new();
        let start = match parse_moment("The time", start) {
            Ok(start) => Some(start),
            Err(err) => {
                problems.push(err.to_string());
                None
            }
        };
        let name = name.trim();
        problems.extend(name_problem(name));
        let email = match EmailAddress::parse(email) {
            Ok(email) => Some(email),
            Err(err) => {
                problems.push(format!("The email address: {err}."));
                None
            }
        };
        let topic = topic.trim();
        problems.extend(free_text_problem(topic, 2000, "A topic"));
        match (start, email) {
            (Some(start), Some(email)) if problems.is_empty() => Ok(NewBooking {
                start,
                name: name.to_string(),
                email,
                topic: normalized_line_breaks(topic),
            }),
            _ => Err(BookingError::Invalid(problems.join(" "))),
        }
    }
}

/// Whether `mode` lets this caller book: `access` needs a redeemed code (a visitor's
/// session) or the owner's agent.
pub fn may_book(mode: BookingMode, actor: Actor, access_granted: bool) -> Result<(), BookingError> {
    match (mode, actor) {
        (BookingMode::Off, _) => Err(BookingError::Closed),
        (BookingMode::Access, Actor::Visitor) if !access_granted => Err(BookingError::NeedsAccess),
        _ => Ok(()),
    }
}

/// Books `new.start` for `new.email`: in one transaction the row, the owner's
/// notification and the visitor's confirmation (both mail jobs) and the
/// `booking.created` event. The time must be a free slot of the availability; a slot
/// someone else took meanwhile is [`BookingError::Taken`], with nothing written.
// Not `err`: a refusal (a taken slot, a bad time) is the visitor's, not ours to log as
// an error; an internal one is logged where it is answered (`AppError`).
#[tracing::instrument(skip_all)]
pub async fn create(
    pool: &PgPool,
    jobs: &JobClient,
    tz: &TimeZone,
    uid_host: &str,
    new: &NewBooking,
    by: Actor,
) -> Result<Booking, BookingError> {
    let owner = availability(pool).await?;
    let now = Timestamp::now();
    let just_after = new
        .start
        .checked_add(jiff::SignedDuration::from_secs(1))
        .unwrap_or(Timestamp::MAX);
    let on_grid = owner
        .grid(tz, new.start, just_after)
        .into_iter()
        .find(|slot| slot.start == new.start);
    let slot = match on_grid {
        Some(slot) if slot.start > now && slot.start < owner.horizon(tz, now) => slot,
        Some(slot) if slot.start <= now => {
            return Err(BookingError::Invalid(
                "That time has passed. Please pick one of the free times.".into(),
            ));
        }
        _ => {
            return Err(BookingError::Invalid(format!(
                "{} is not one of the times the owner offers. Please pick one of the free times.",
                new.start
            )));
        }
    };
    let blocked_until = slot
        .end
        .checked_add(owner.buffer())
        .map_err(|_| BookingError::Invalid("That time is out of range.".into()))?;
    let uid = format!(
        "booking-{}@{uid_host}",
        crate::domain::secrets::new_token().to_lowercase()
    );
    // Should two bookings still deadlock (a row an operator inserts by hand takes no
    // lock), PostgreSQL aborts one (40P01); its next try meets the winner's row.
    let mut tries = 0;
    let id = loop {
        tries += 1;
        match insert_booking(pool, jobs, &uid, slot, blocked_until, new, by).await {
            Err(BookingError::Internal(err)) if tries < 5 && is_deadlock(&err) => continue,
            other => break other?,
        }
    };
    tracing::info!(booking.id = id, "a meeting was booked");
    get(pool, id).await?.ok_or(BookingError::NotFound(id))
}

fn is_deadlock(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<sqlx::Error>()
            .and_then(|err| err.as_database_error())
            .and_then(|err| err.code())
            .is_some_and(|code| code == "40P01")
    })
}

/// The advisory lock (transaction-scoped) that makes bookings one at a time.
const BOOKINGS_LOCK: i64 = 0x626f_6f6b_696e_6773; // "bookings"

/// The booking's one transaction (see [`create`]); answers its id.
async fn insert_booking(
    pool: &PgPool,
    jobs: &JobClient,
    uid: &str,
    slot: Slot,
    blocked_until: Timestamp,
    new: &NewBooking,
    by: Actor,
) -> Result<i64, BookingError> {
    let mut tx = pool.begin().await?;
    // Bookings are made one at a time (they are few): without this, racing inserts can
    // each wait inside the exclusion constraint's check for the other, and PostgreSQL
    // only breaks such a deadlock after a second, one pair at a time; fifty racing
    // visitors then take many seconds. In turn, each loser meets the winner's committed
    // row at once. The constraint stays what keeps them apart.
    sqlx::query!("SELECT pg_advisory_xact_lock($1)", BOOKINGS_LOCK)
        .execute(&mut *tx)
        .await?;
    let inserted = sqlx::query_scalar!(
        r#"
        INSERT INTO bookings (uid, starts_at, ends_at, blocked_until, name, email, topic, booked_by)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
        RETURNING id
        "#,
        uid,
        offset_date_time(slot.start),
        offset_date_time(slot.end),
        offset_date_time(blocked_until),
        new.name,
        new.email.as_str(),
        new.topic,
        by.as_str(),
    )
    .fetch_one(&mut *tx)
    .await;
    let id = match inserted {
        Ok(id) => id,
        // exclusion_violation: a confirmed booking holds (part of) this time.
        Err(sqlx::Error::Database(err)) if err.code().as_deref() == Some("23P01") => {
            return Err(BookingError::Taken);
        }
        Err(err) => return Err(err.into()),
    };
    let args = BookingArgs { booking_id: id };
    let notify = jobs
        .insert_tx::<MailKind<NotifyOwner>>(&mut tx, &args)
        .await?;
    let confirmation = jobs
        .insert_tx::<MailKind<Confirmation>>(&mut tx, &args)
        .await?;
    let created = booking_event(
        EventType::BookingCreated,
        id,
        slot.start,
        slot.end,
        new.email.as_str(),
    );
    sqlx::query!(
        r#"
        UPDATE bookings SET notify_job_id = $2, confirmation_job_id = $3 WHERE id = $1
        RETURNING record_event($4, $5, $6, $7) AS "event_id!"
        "#,
        id,
        notify.0,
        confirmation.0,
        created.event_type.as_str(),
        created.subject_id,
        created.data,
        crate::telemetry::otel::current_traceparent(),
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(id)
}

/// `booking.created|cancelled`: `{booking_id, start, end, email}`.
fn booking_event(
    event_type: EventType,
    id: i64,
    start: Timestamp,
    end: Timestamp,
    email: &str,
) -> NewEvent {
    NewEvent {
        event_type,
        subject_id: Some(id),
        data: serde_json::json!({
            "booking_id": id,
            "start": start.to_string(),
            "end": end.to_string(),
            "email": email,
        }),
    }
}

/// One booking.
pub async fn get(pool: &PgPool, id: i64) -> Result<Option<Booking>, sqlx::Error> {
    Ok(select(pool, Some(id), None, None, None, 1).await?.pop())
}

/// Bookings (cancelled ones too) that start in `[from, to)`, soonest first, at most
/// `limit`.
pub async fn list(
    pool: &PgPool,
    from: Option<Timestamp>,
    to: Option<Timestamp>,
    limit: i64,
) -> Result<Vec<Booking>, sqlx::Error> {
    select(pool, None, None, from, to, limit).await
}

/// The next `limit` confirmed bookings that start at `from` or later, soonest first
/// (however many cancelled ones lie between them).
pub async fn upcoming_confirmed(
    pool: &PgPool,
    from: Timestamp,
    limit: i64,
) -> Result<Vec<Booking>, sqlx::Error> {
    select(
        pool,
        None,
        Some(BookingState::Confirmed),
        Some(from),
        None,
        limit,
    )
    .await
}

/// The one read of bookings, with their owner notification's state: one by id, or a
/// time range (of one state, or of both).
async fn select(
    pool: &PgPool,
    id: Option<i64>,
    state: Option<BookingState>,
    from: Option<Timestamp>,
    to: Option<Timestamp>,
    limit: i64,
) -> Result<Vec<Booking>, sqlx::Error> {
    sqlx::query_as!(
        Booking,
        r#"
        SELECT b.id, b.uid, b.starts_at, b.ends_at, b.name, b.email, b.topic,
               b.state AS "state: BookingState", b.created_at, b.cancelled_at,
               b.notify_job_id, b.confirmation_job_id, b.cancellation_job_id,
               j.state AS "notify_job_state?: JobState", j.last_error AS notify_error
        FROM bookings b LEFT JOIN job_status j ON j.id = b.notify_job_id
        WHERE ($1::bigint IS NULL OR b.id = $1)
          AND ($2::timestamptz IS NULL OR b.starts_at >= $2)
          AND ($3::timestamptz IS NULL OR b.starts_at < $3)
          AND ($5::booking_state IS NULL OR b.state = $5)
        ORDER BY b.starts_at, b.id
        LIMIT $4
        "#,
        id,
        from.map(offset_date_time),
        to.map(offset_date_time),
        limit,
        state as Option<BookingState>,
    )
    .fetch_all(pool)
    .await
}

/// Cancels booking `id`: in one transaction `cancelled`, the `booking.cancellation`
/// mail job (both sides) and the `booking.cancelled` event.
#[tracing::instrument(skip(pool, jobs))]
pub async fn cancel(
    pool: &PgPool,
    jobs: &JobClient,
    id: i64,
    by: Actor,
) -> Result<Booking, BookingError> {
    let mut tx = pool.begin().await?;
    let current = sqlx::query!(
        r#"SELECT state AS "state: BookingState", starts_at, ends_at, email FROM bookings WHERE id = $1 FOR UPDATE"#,
        id
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(BookingError::NotFound(id))?;
    if current.state == BookingState::Cancelled {
        return Err(BookingError::AlreadyCancelled(id));
    }
    let job = jobs
        .insert_tx::<Cancellation>(&mut tx, &BookingArgs { booking_id: id })
        .await?;
    sqlx::query!(
        r#"
        UPDATE bookings
        SET state = 'cancelled', cancelled_at = now(), cancelled_by = $2, cancellation_job_id = $3
        WHERE id = $1
        "#,
        id,
        by.as_str(),
        job.0,
    )
    .execute(&mut *tx)
    .await?;
    let cancelled = booking_event(
        EventType::BookingCancelled,
        id,
        timestamp(current.starts_at),
        timestamp(current.ends_at),
        &current.email,
    );
    events::record(&mut tx, &cancelled).await?;
    tx.commit().await?;
    tracing::info!(booking.id = id, by = by.as_str(), "a booking was cancelled");
    get(pool, id).await?.ok_or(BookingError::NotFound(id))
}

/// The booking a visitor's cancel link names, if the link may still cancel it: known,
/// the booking still confirmed, the meeting not yet started.
pub async fn by_cancel_link(pool: &PgPool, token: &str) -> Result<Booking, BookingError> {
    let token = token.trim();
    if token.is_empty() || token.len() > 200 {
        return Err(BookingError::UnknownLink);
    }
    let id = sqlx::query_scalar!(
        "SELECT booking_id FROM booking_cancel_tokens WHERE token_hash = $1",
        token_hash(token)
    )
    .fetch_optional(pool)
    .await?
    .ok_or(BookingError::UnknownLink)?;
    let booking = get(pool, id).await?.ok_or(BookingError::UnknownLink)?;
    if booking.state == BookingState::Cancelled {
        return Err(BookingError::LinkUsed);
    }
    if booking.starts_at <= OffsetDateTime::now_utc() {
        return Err(BookingError::Started);
    }
    Ok(booking)
}

/// Cancels the booking a visitor's link names (once: a used link says so).
pub async fn cancel_by_link(
    pool: &PgPool,
    jobs: &JobClient,
    token: &str,
) -> Result<Booking, BookingError> {
    let booking = by_cancel_link(pool, token).await?;
    match cancel(pool, jobs, booking.id, Actor::Visitor).await {
        Err(BookingError::AlreadyCancelled(_)) => Err(BookingError::LinkUsed),
        other => other,
    }
}
