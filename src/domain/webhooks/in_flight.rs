//! How many deliveries one endpoint may have in flight in this process.
//!
//! The `webhooks` queue's workers are shared by every endpoint: an endpoint that hangs
//! would hold each worker that takes one of its deliveries for the whole delivery
//! timeout, and the other endpoints' deliveries would wait behind it. So an endpoint
//! that has not shown it answers quickly gets at most [`UNPROVEN_IN_FLIGHT`]
//! deliveries in flight at once; the others wait (a snooze: no attempt spent, no
//! worker held) and try again.
//!
//! An endpoint shows it answers quickly by answering (any status) within half the
//! delivery timeout; it then has no cap of its own (its deliveries take as many
//! workers as the queue has), until one of its attempts takes longer than that, or an
//! attempt under way has been going that long, or one ends with no answer (a timeout,
//! a refused connection). The signal is the HTTP exchange alone, never the job's
//! database work, so a busy machine does not throttle a healthy endpoint; and a new
//! process, or an endpoint it has not delivered to yet, starts capped, which costs a
//! healthy endpoint one round trip.
//!
//! The circuit breaker ([`super::circuit`]) is the other half: it stops the attempts
//! to an endpoint that keeps failing. This cap keeps what a slow or silent endpoint
//! takes while it still gets attempts to a few workers. Both count per endpoint; the
//! cap counts per process (N copies give a silent endpoint at most N × 4 workers).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::PgPool;

/// The most deliveries in flight at once, in this process, to an endpoint that has
/// not shown it answers quickly.
pub const UNPROVEN_IN_FLIGHT: usize = 4;

/// The shortest and longest a delivery over the cap waits before it tries again.
const SHORTEST_WAIT: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Standing {
    /// No attempt of this process has ended yet.
    Unproven,
    /// Its last attempt got an answer within half the timeout.
    Quick,
    /// Its last attempt got no answer, or took half the timeout or more.
    Slow,
}

struct Endpoint {
    standing: Standing,
    /// Attempts under way: their tickets and when their HTTP exchange began.
    under_way: Vec<(u64, Instant)>,
}

#[derive(Default)]
struct Book {
    endpoints: HashMap<i64, Endpoint>,
    next_ticket: u64,
}

/// This process's deliveries in flight per endpoint.
#[derive(Clone)]
pub struct InFlight {
    slow_after: Duration,
    book: Arc<Mutex<Book>>,
}

/// Whether a delivery may go now.
pub enum Boarding {
    /// It may; the flight ends (and is counted out) when dropped.
    Go(Flight),
    /// Over the cap: try again after this long.
    WaitFor(Duration),
}

/// One attempt under way to an endpoint.
pub struct Flight {
    in_flight: InFlight,
    endpoint: i64,
    ticket: u64,
}

impl InFlight {
    /// `timeout` is the delivery timeout: an answer within half of it is quick.
    pub fn new(timeout: Duration) -> InFlight {
        InFlight {
            slow_after: timeout / 2,
            book: Arc::default(),
        }
    }

    /// Asks for a place for one delivery to `endpoint` (see the module note).
    pub fn board(&self, endpoint: i64) -> Boarding {
        self.board_at(endpoint, Instant::now())
    }

    fn board_at(&self, endpoint: i64, now: Instant) -> Boarding {
        let mut book = self.book.lock().expect("not poisoned");
        let ticket = book.next_ticket;
        book.next_ticket += 1;
        let entry = book.endpoints.entry(endpoint).or_insert(Endpoint {
            standing: Standing::Unproven,
            under_way: Vec::new(),
        });
        let longest = entry
            .under_way
            .iter()
            .map(|(_, began)| now.saturating_duration_since(*began))
            .max()
            .unwrap_or_default();
        let trusted = entry.standing == Standing::Quick && longest < self.slow_after;
        if trusted || entry.under_way.len() < UNPROVEN_IN_FLIGHT {
            entry.under_way.push((ticket, now));
            return Boarding::Go(Flight {
                in_flight: self.clone(),
                endpoint,
                ticket,
            });
        }
        // The longer the attempts under way have taken, the longer a place takes.
        Boarding::WaitFor(longest.clamp(SHORTEST_WAIT, self.slow_after.max(SHORTEST_WAIT)))
    }

    /// How many deliveries to `endpoint` are in flight here now.
    pub fn under_way(&self, endpoint: i64) -> usize {
        let book = self.book.lock().expect("not poisoned");
        book.endpoints
            .get(&endpoint)
            .map_or(0, |entry| entry.under_way.len())
    }
}

impl Flight {
    /// The attempt ended: `answered_in` is how long its answer took (`None`: no
    /// answer). Learns the endpoint's standing from it.
    pub fn landed(self, answered_in: Option<Duration>) {
        let quick = answered_in.is_some_and(|took| took < self.in_flight.slow_after);
        let mut book = self.in_flight.book.lock().expect("not poisoned");
        if let Some(entry) = book.endpoints.get_mut(&self.endpoint) {
            entry.standing = if quick {
                Standing::Quick
            } else {
                Standing::Slow
            };
        }
        // Counted out by Drop.
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        let mut book = self.in_flight.book.lock().expect("not poisoned");
        if let Some(entry) = book.endpoints.get_mut(&self.endpoint) {
            entry.under_way.retain(|(ticket, _)| *ticket != self.ticket);
        }
    }
}

/// How many deliveries to `endpoint` are being attempted now, by every process: its
/// `webhooks.deliver` jobs that are `running` (a few rows, found by the state index
/// through the engine's published view `job_status`, which PostgreSQL plans as `jobs`).
pub async fn under_way_everywhere(pool: &PgPool, endpoint: i64) -> Result<i64, sqlx::Error> {
    let count = sqlx::query_scalar!(
        r#"
        SELECT count(*) AS "count!"
        FROM job_status j
        JOIN webhook_deliveries d ON d.id = (j.args->>'delivery_id')::bigint
        WHERE j.state = 'running' AND j.kind = 'webhooks.deliver' AND d.endpoint_id = $1
        "#,
        endpoint,
    )
    .fetch_one(pool)
    .await?;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn goes(boarding: Boarding) -> Flight {
        match boarding {
            Boarding::Go(flight) => flight,
            Boarding::WaitFor(wait) => panic!("told to wait {wait:?}"),
        }
    }

    #[test]
    fn an_unproven_endpoint_gets_four_at_once_and_a_quick_one_as_many_as_come() {
        let in_flight = InFlight::new(Duration::from_secs(10));
        let first: Vec<Flight> = (0..UNPROVEN_IN_FLIGHT)
            .map(|_| goes(in_flight.board(1)))
            .collect();
        assert!(
            matches!(in_flight.board(1), Boarding::WaitFor(_)),
            "the fifth waits"
        );
        assert!(
            matches!(in_flight.board(2), Boarding::Go(_)),
            "another endpoint has places of its own"
        );

        // One answers quickly: the endpoint is trusted, and takes more.
        let mut first = first.into_iter();
        first.next().unwrap().landed(Some(Duration::from_millis(5)));
        let more: Vec<Flight> = (0..20).map(|_| goes(in_flight.board(1))).collect();
        assert_eq!(in_flight.under_way(1), UNPROVEN_IN_FLIGHT - 1 + 20);
        drop(more);
        drop(first);
        assert_eq!(in_flight.under_way(1), 0, "every flight is counted out");
    }

    #[test]
    fn an_attempt_with_no_answer_or_a_slow_one_brings_the_cap_back() {
        let in_flight = InFlight::new(Duration::from_secs(10));
        goes(in_flight.board(1)).landed(Some(Duration::from_millis(5)));
        let held: Vec<Flight> = (0..UNPROVEN_IN_FLIGHT)
            .map(|_| goes(in_flight.board(1)))
            .collect();
        goes(in_flight.board(1)).landed(None);
        assert!(
            matches!(in_flight.board(1), Boarding::WaitFor(_)),
            "timed out: capped"
        );
        drop(held);

        goes(in_flight.board(1)).landed(Some(Duration::from_millis(5)));
        let held: Vec<Flight> = (0..UNPROVEN_IN_FLIGHT)
            .map(|_| goes(in_flight.board(1)))
            .collect();
        goes(in_flight.board(1)).landed(Some(Duration::from_secs(6)));
        assert!(
            matches!(in_flight.board(1), Boarding::WaitFor(_)),
            "slow: capped"
        );
        drop(held);
    }

    #[test]
    fn a_quick_endpoint_with_an_attempt_hanging_under_way_is_capped_again() {
        let in_flight = InFlight::new(Duration::from_millis(40));
        goes(in_flight.board(1)).landed(Some(Duration::from_millis(1)));
        let hanging: Vec<Flight> = (0..UNPROVEN_IN_FLIGHT)
            .map(|_| goes(in_flight.board(1)))
            .collect();
        assert!(
            matches!(in_flight.board(1), Boarding::Go(_)),
            "still trusted"
        );
        // As if 25 ms had passed: over half the timeout.
        match in_flight.board_at(1, Instant::now() + Duration::from_millis(25)) {
            Boarding::WaitFor(wait) => assert!(wait >= SHORTEST_WAIT),
            Boarding::Go(_) => panic!("an attempt under way for half the timeout must cap it"),
        }
        drop(hanging);
    }
}
