//! Limits on what clients may try, in this process's memory (a restart forgets them, and
//! each copy of StandMeet counts on its own):
//!
//! - [`GuessLimiter`], for secrets (a password at sign-in, an access code): only
//!   failures count. An address that failed too often this minute is refused; an
//!   account that many addresses fail against makes every further check of it wait
//!   longer (doubling, capped), but never locks it: its owner, with the right secret,
//!   from an address that is not over its own limit, gets in. At most a few password
//!   hashes are computed at once, so guessing cannot take the machine.
//! - [`AttemptLimiter`], for writes that are not guesses (access requests, bookings): a
//!   burst of N, refilled at N an hour, per client address and per email. A request the
//!   address limit refuses does not spend the email's share, so nobody can use up
//!   someone else's.
//!
//! Every key is bounded in length (emails at 254 characters) and the maps in number.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

pub struct AttemptLimiter {
    by_address: DefaultKeyedRateLimiter<IpAddr>,
    by_subject: DefaultKeyedRateLimiter<String>,
}

impl AttemptLimiter {
    /// Allows `per_minute` attempts at once, and `per_minute` a minute after that.
    pub fn per_minute(per_minute: NonZeroU32) -> Self {
        Self::with_quota(Quota::per_minute(per_minute))
    }

    /// Allows `per_hour` attempts at once, and `per_hour` an hour after that.
    pub fn per_hour(per_hour: NonZeroU32) -> Self {
        Self::with_quota(Quota::per_hour(per_hour))
    }

    fn with_quota(quota: Quota) -> Self {
        AttemptLimiter {
            by_address: RateLimiter::keyed(quota),
            by_subject: RateLimiter::keyed(quota),
        }
    }

    /// Counts one attempt from `address` about `subject` (an email; compared without
    /// case). Answers how long to wait when either limit is used up. An attempt the
    /// address limit refuses is not counted against the subject.
    pub fn check(&self, address: Option<IpAddr>, subject: &str) -> Result<(), Duration> {
        let now = DefaultClock::default().now();
        if let Some(address) = address
            && let Err(not_until) = self.by_address.check_key(&address)
        {
            return Err(not_until.wait_time_from(now));
        }
        let subject = subject_key(subject);
        if !subject.is_empty()
            && let Err(not_until) = self.by_subject.check_key(&subject)
        {
            return Err(not_until.wait_time_from(now));
        }
        Ok(())
    }

    /// Forgets keys whose limits have fully refilled, so memory stays bounded.
    pub fn forget_idle(&self) {
        self.by_address.retain_recent();
        self.by_subject.retain_recent();
    }
}

/// A subject (an email) as a limiter's key: trimmed, lower case, at most 254 characters
/// (the longest email), so a client cannot make the maps hold megabytes.
fn subject_key(subject: &str) -> String {
    subject
        .trim()
        .chars()
        .take(254)
        .collect::<String>()
        .to_lowercase()
}

/// Failed attempts per client address, counted in one-minute windows: an address that
/// failed `per_minute` times is refused everything (right or wrong) until its minute is
/// over, so guessing gets no faster than that. Only failures count, so a client that
/// gets it right is never slowed by its own traffic.
pub struct FailedAttempts {
    per_minute: u32,
    windows: std::sync::Mutex<std::collections::HashMap<IpAddr, FailureWindow>>,
}

#[derive(Clone, Copy)]
struct FailureWindow {
    started: std::time::Instant,
    failures: u32,
}

/// Keeps `map` under `max` entries before one more goes in: first it forgets the
/// entries that are no longer `current`, then, under a flood of fresh keys, all of them
/// (a limiter that forgets is better than one that runs out of memory).
fn make_room<K, V>(
    map: &mut std::collections::HashMap<K, V>,
    max: usize,
    current: impl Fn(&V) -> bool,
) {
    if map.len() >= max {
        map.retain(|_, value| current(value));
        if map.len() >= max {
            map.clear();
        }
    }
}

/// How many addresses [`FailedAttempts`] remembers at most; past that it forgets the
/// windows that are over (and, under a flood from more addresses, all of them).
const MAX_REMEMBERED_ADDRESSES: usize = 100_000;
const FAILURE_WINDOW: Duration = Duration::from_secs(60);

impl FailedAttempts {
    pub fn per_minute(per_minute: u32) -> Self {
        FailedAttempts {
            per_minute,
            windows: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// How long `address` must wait before it may try again, if it must.
    pub fn blocked(&self, address: IpAddr) -> Option<Duration> {
        let windows = self
            .windows
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let window = windows.get(&address)?;
        let age = window.started.elapsed();
        (window.failures >= self.per_minute && age < FAILURE_WINDOW).then(|| FAILURE_WINDOW - age)
    }

    /// Counts one failure of `address`.
    pub fn failed(&self, address: IpAddr) {
        let mut windows = self
            .windows
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        make_room(&mut windows, MAX_REMEMBERED_ADDRESSES, |window| {
            window.started.elapsed() < FAILURE_WINDOW
        });
        let now = std::time::Instant::now();
        let window = windows.entry(address).or_insert(FailureWindow {
            started: now,
            failures: 0,
        });
        if window.started.elapsed() >= FAILURE_WINDOW {
            *window = FailureWindow {
                started: now,
                failures: 0,
            };
        }
        window.failures = window.failures.saturating_add(1);
    }
}

/// Failures against one subject that cost nothing; after them, each check of it waits
/// [`BACKOFF_START`], doubling with every further failure up to [`BACKOFF_CAP`].
const FREE_FAILURES: u32 = 5;
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_CAP: Duration = Duration::from_millis(3_200);
/// A subject's failures are forgotten this long after its last one.
const SUBJECT_MEMORY: Duration = Duration::from_secs(15 * 60);
/// How many subjects [`GuessLimiter`] remembers at most.
const MAX_REMEMBERED_SUBJECTS: usize = 100_000;

/// Limits on guessing a secret (see the module documentation).
pub struct GuessLimiter {
    by_address: FailedAttempts,
    by_subject: std::sync::Mutex<std::collections::HashMap<String, SubjectFailures>>,
    checks: tokio::sync::Semaphore,
}

#[derive(Clone, Copy)]
struct SubjectFailures {
    failures: u32,
    last: std::time::Instant,
}

impl GuessLimiter {
    /// `failures_per_minute` failures per address, and at most `concurrent_checks`
    /// secrets checked at once.
    pub fn new(failures_per_minute: u32, concurrent_checks: usize) -> Self {
        GuessLimiter {
            by_address: FailedAttempts::per_minute(failures_per_minute),
            by_subject: std::sync::Mutex::new(std::collections::HashMap::new()),
            checks: tokio::sync::Semaphore::new(concurrent_checks.max(1)),
        }
    }

    /// Before checking a secret from `address` about `subject`: refused (with how long
    /// to wait) when the address failed too often this minute; else, once the subject's
    /// backoff has passed and a check slot is free, a permit to check.
    pub async fn admit(
        &self,
        address: Option<IpAddr>,
        subject: &str,
    ) -> Result<tokio::sync::SemaphorePermit<'_>, Duration> {
        if let Some(wait) = address.and_then(|address| self.by_address.blocked(address)) {
            return Err(wait);
        }
        let backoff = self.backoff(subject);
        if !backoff.is_zero() {
            tokio::time::sleep(backoff).await;
        }
        self.checks
            .acquire()
            .await
            .map_err(|_| Duration::from_secs(1))
    }

    /// How long a check of `subject` waits first, from its recent failures.
    pub fn backoff(&self, subject: &str) -> Duration {
        let subjects = self
            .by_subject
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(record) = subjects.get(&subject_key(subject)) else {
            return Duration::ZERO;
        };
        if record.last.elapsed() >= SUBJECT_MEMORY || record.failures < FREE_FAILURES {
            return Duration::ZERO;
        }
        let doublings = (record.failures - FREE_FAILURES).min(16);
        (BACKOFF_START * 2u32.pow(doublings)).min(BACKOFF_CAP)
    }

    /// A wrong secret from `address` about `subject`.
    pub fn failed(&self, address: Option<IpAddr>, subject: &str) {
        if let Some(address) = address {
            self.by_address.failed(address);
        }
        let key = subject_key(subject);
        if key.is_empty() {
            return;
        }
        let mut subjects = self
            .by_subject
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        make_room(&mut subjects, MAX_REMEMBERED_SUBJECTS, |record| {
            record.last.elapsed() < SUBJECT_MEMORY
        });
        let now = std::time::Instant::now();
        let record = subjects.entry(key).or_insert(SubjectFailures {
            failures: 0,
            last: now,
        });
        if record.last.elapsed() >= SUBJECT_MEMORY {
            record.failures = 0;
        }
        record.failures = record.failures.saturating_add(1);
        record.last = now;
    }

    /// The right secret about `subject`: its failures are forgotten.
    pub fn succeeded(&self, subject: &str) {
        self.by_subject
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&subject_key(subject));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_subject_backs_off_but_never_locks_and_a_success_forgets() {
        let limiter = GuessLimiter::new(100, 2);
        let owner = "Owner@Example.com";
        for n in 0..FREE_FAILURES {
            assert_eq!(
                limiter.backoff(owner),
                Duration::ZERO,
                "failure {n} is free"
            );
            limiter.failed(Some(format!("198.51.100.{n}").parse().unwrap()), owner);
        }
        assert_eq!(limiter.backoff("owner@example.com"), BACKOFF_START);
        limiter.failed(None, owner);
        assert_eq!(limiter.backoff(owner), BACKOFF_START * 2);
        for _ in 0..20 {
            limiter.failed(None, owner);
        }
        assert_eq!(limiter.backoff(owner), BACKOFF_CAP, "capped, not locked");
        // A clean address is admitted (after the wait).
        let clean: IpAddr = "203.0.113.50".parse().unwrap();
        assert!(limiter.admit(Some(clean), owner).await.is_ok());
        limiter.succeeded(owner);
        assert_eq!(limiter.backoff(owner), Duration::ZERO);
        // Keys are bounded: a megabyte subject is kept as 254 characters.
        limiter.failed(None, &"x".repeat(1_000_000));
        let longest = limiter
            .by_subject
            .lock()
            .unwrap()
            .keys()
            .map(String::len)
            .max();
        assert_eq!(longest, Some(254));
    }

    #[test]
    fn a_refused_address_does_not_spend_the_subjects_share() {
        let limiter = AttemptLimiter::per_hour(NonZeroU32::new(2).unwrap());
        let attacker: IpAddr = "192.0.2.66".parse().unwrap();
        let visitor: IpAddr = "192.0.2.77".parse().unwrap();
        assert!(limiter.check(Some(attacker), "a@example.com").is_ok());
        assert!(limiter.check(Some(attacker), "b@example.com").is_ok());
        for _ in 0..10 {
            assert!(limiter.check(Some(attacker), "victim@example.com").is_err());
        }
        assert!(limiter.check(Some(visitor), "victim@example.com").is_ok());
    }

    #[test]
    fn only_failures_count_and_a_blocked_address_waits_its_minute() {
        let failures = FailedAttempts::per_minute(3);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        for _ in 0..2 {
            failures.failed(a);
            assert!(failures.blocked(a).is_none());
        }
        failures.failed(a);
        let wait = failures.blocked(a).expect("blocked after three failures");
        assert!(
            wait > Duration::from_secs(50) && wait <= FAILURE_WINDOW,
            "{wait:?}"
        );
        assert!(failures.blocked(b).is_none(), "another address is not");
    }

    #[test]
    fn the_attempt_after_the_burst_is_refused_for_that_address_only() {
        let limiter = AttemptLimiter::per_minute(NonZeroU32::new(10).unwrap());
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        for i in 0..10 {
            assert!(
                limiter
                    .check(Some(a), &format!("user{i}@example.com"))
                    .is_ok(),
                "attempt {i}"
            );
        }
        let wait = limiter.check(Some(a), "someone@example.com").unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(6),
            "{wait:?}"
        );
        assert!(limiter.check(Some(b), "someone@example.com").is_ok());
    }

    #[test]
    fn one_email_is_limited_across_addresses_and_cases() {
        let limiter = AttemptLimiter::per_minute(NonZeroU32::new(3).unwrap());
        for i in 0..3 {
            let address: IpAddr = format!("198.51.100.{i}").parse().unwrap();
            assert!(limiter.check(Some(address), "Owner@Example.com").is_ok());
        }
        let fresh: IpAddr = "198.51.100.99".parse().unwrap();
        assert!(limiter.check(Some(fresh), "owner@example.com").is_err());
    }
}
