//! What keeps one endpoint that is down from holding up the others (all share the
//! `webhooks` queue's workers) for longer than one round of attempts:
//! a circuit breaker. [`OPEN_AFTER`] attempts that failed in a row (of any of its
//! deliveries) open the endpoint's circuit for [`open_for`] (30 backoff units, doubling
//! with every failed trial, at most 600: 30 s to 10 minutes by default). While it is
//! open, its deliveries wait for it without an attempt (a snooze: the worker is free, the
//! attempt not spent); when it is over, one delivery makes a trial ([`admit`]): through,
//! the circuit closes and the rest follow; failed, it opens again, longer. The state
//! lives on the endpoint's row, so every process agrees; `/admin/webhooks/<id>` shows it.
//!
//! A test message ("Send test") goes through an open circuit (that is how an admin
//! finds out whether the endpoint works again), and its outcome counts like any other.

use std::time::Duration;

use sqlx::PgPool;
use time::OffsetDateTime;

/// Attempts failed in a row that open an endpoint's circuit.
pub const OPEN_AFTER: i32 = 5;
/// The circuit's first opening, in backoff units (`STANDMEET_RETRY_BASE_MS`).
const FIRST_OPENING_UNITS: u32 = 30;
/// Its longest opening, in backoff units.
const LONGEST_OPENING_UNITS: u32 = 600;

/// How long the circuit stays open after `failed_in_a_row` attempts failed in a row
/// (at least [`OPEN_AFTER`]), with `unit` the backoff unit.
pub fn open_for(failed_in_a_row: i32, unit: Duration) -> Duration {
    let doublings = (failed_in_a_row - OPEN_AFTER).clamp(0, 16) as u32;
    (unit * FIRST_OPENING_UNITS * 2u32.pow(doublings)).min(unit * LONGEST_OPENING_UNITS)
}

/// What the circuit says to a delivery about to make an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Closed: go ahead.
    Go,
    /// The opening is over and this delivery makes the one trial.
    Trial,
    /// Open: wait until then.
    WaitUntil(OffsetDateTime),
}

/// Asks endpoint `endpoint`'s circuit whether a delivery may make an attempt now. The
/// first to ask after an opening is over gets the trial, and holds the circuit for
/// `trial_time` (its attempt's longest time) so that no other goes meanwhile; should its
/// process die during it, the next delivery after that time makes the trial instead.
pub async fn admit(
    pool: &PgPool,
    endpoint: i64,
    trial_time: Duration,
) -> Result<Admission, sqlx::Error> {
    let row = sqlx::query!(
        r#"
        WITH trial AS (
            UPDATE webhook_endpoints
            SET circuit_open_until = now() + $2::float8 * interval '1 millisecond'
            WHERE id = $1 AND circuit_open_until <= now()
            RETURNING id
        )
        SELECT EXISTS (SELECT FROM trial) AS "trial!",
               (SELECT circuit_open_until FROM webhook_endpoints
                WHERE id = $1 AND circuit_open_until > now()) AS open_until
        "#,
        endpoint,
        trial_time.as_millis() as f64,
    )
    .fetch_one(pool)
    .await?;
    Ok(match (row.trial, row.open_until) {
        (true, _) => Admission::Trial,
        (false, Some(until)) => Admission::WaitUntil(until),
        (false, None) => Admission::Go,
    })
}

/// After a failed attempt to `endpoint`: it counts, and at [`OPEN_AFTER`] in a row
/// (again after a failed trial) opens the circuit for [`open_for`]. (One that got
/// through closes the circuit in the statement that records the delivery, in
/// `deliver`.)
pub async fn record_failure(
    pool: &PgPool,
    endpoint: i64,
    unit: Duration,
) -> Result<(), sqlx::Error> {
    let unit_ms = unit.as_millis() as f64;
    sqlx::query!(
        r#"
        UPDATE webhook_endpoints
        SET attempts_failed_in_a_row = attempts_failed_in_a_row + 1,
            circuit_open_until = CASE
                WHEN attempts_failed_in_a_row + 1 >= $2::integer THEN now() + least(
                    $3::float8 * $4::float8
                        * power(2, least(attempts_failed_in_a_row + 1 - $2::integer, 16)),
                    $3::float8 * $5::float8) * interval '1 millisecond'
                ELSE circuit_open_until END
        WHERE id = $1
        "#,
        endpoint,
        OPEN_AFTER,
        unit_ms,
        f64::from(FIRST_OPENING_UNITS),
        f64::from(LONGEST_OPENING_UNITS),
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// An endpoint's circuit as its page shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Circuit {
    pub attempts_failed_in_a_row: i32,
    /// Until when it is open (a trial holds it too), when it is.
    pub open_until: Option<OffsetDateTime>,
}

/// The circuit of endpoint `endpoint` now (`None`: no such endpoint).
pub async fn circuit(pool: &PgPool, endpoint: i64) -> Result<Option<Circuit>, sqlx::Error> {
    let row = sqlx::query!(
        r#"
        SELECT attempts_failed_in_a_row,
               CASE WHEN circuit_open_until > now() THEN circuit_open_until END AS open_until
        FROM webhook_endpoints WHERE id = $1
        "#,
        endpoint,
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|row| Circuit {
        attempts_failed_in_a_row: row.attempts_failed_in_a_row,
        open_until: row.open_until,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_circuit_opens_for_longer_with_every_failed_trial_up_to_its_cap() {
        let unit = Duration::from_secs(1);
        assert_eq!(open_for(OPEN_AFTER, unit), Duration::from_secs(30));
        assert_eq!(open_for(OPEN_AFTER + 1, unit), Duration::from_secs(60));
        assert_eq!(open_for(OPEN_AFTER + 4, unit), Duration::from_secs(480));
        assert_eq!(open_for(OPEN_AFTER + 5, unit), Duration::from_secs(600));
        assert_eq!(open_for(1_000, unit), Duration::from_secs(600));
        assert_eq!(
            open_for(OPEN_AFTER, Duration::from_millis(10)),
            Duration::from_millis(300)
        );
    }
}
