//! Limits on what clients may try, in this process's memory (a restart forgets them, and
//! each copy of StandMeet counts on its own):
//!
//! - [`GuessLimiter`], for secrets (a password at sign-in, an access code): only
//!   failures count, and a check still under way counts as one until it is known to
//!   have succeeded (otherwise a burst of parallel guesses would all pass the check
//!   before the first failure is counted). An address that failed too often this
//!   minute is refused; an
//!   account that many addresses fail against makes every further check of it wait
//!   longer (doubling, capped), but never locks it: its owner, with the right secret,
//!   from an address that is not over its own limit, gets in. At most a few password
//!   hashes are computed at once, so guessing cannot take the machine.
//! - [`AttemptLimiter`], for writes that are not guesses (access requests, bookings): a
//!   burst of N, refilled at N an hour, per client address and per email. A request the
//!   address limit refuses does not spend the email's share, so nobody can use up
//!   someone else's.
//!
//! An address is counted by its network where one client holds many: an IPv6 address
//! by its /64 (one subscriber's or one machine's share, the least a provider hands
//! out), an IPv4-mapped IPv6 address as the IPv4 address it is ([`address_key`]).
//!
//! Every key is bounded in length (emails at 254 characters) and the maps in number.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// The key a client address is limited under (see the module documentation): an IPv4
/// address as it is; an IPv6 address by its /64, or as the IPv4 address it maps.
pub fn address_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(
                u128::from(v6) & !((1u128 << 64) - 1),
            )),
        },
    }
}

/// How many keys an [`AttemptLimiter`] map holds at most: past that it forgets the keys
/// whose limits have refilled, and, under a flood of fresh keys, all of them (a
/// limiter that forgets is better than one that runs out of memory).
const MAX_LIMITED_KEYS: usize = 100_000;

pub struct AttemptLimiter {
    by_address: BoundedLimiter<IpAddr>,
    by_subject: BoundedLimiter<String>,
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
            by_address: BoundedLimiter::new(quota, MAX_LIMITED_KEYS),
            by_subject: BoundedLimiter::new(quota, MAX_LIMITED_KEYS),
        }
    }

    /// Counts one attempt from `address` about `subject` (an email; compared without
    /// case). Answers how long to wait when either limit is used up. An attempt the
    /// address limit refuses is not counted against the subject.
    pub fn check(&self, address: Option<IpAddr>, subject: &str) -> Result<(), Duration> {
        if let Some(address) = address {
            self.by_address.check(&address_key(address))?;
        }
        let subject = subject_key(subject);
        if !subject.is_empty() {
            self.by_subject.check(&subject)?;
        }
        Ok(())
    }

    /// Forgets keys whose limits have fully refilled, so memory stays bounded.
    pub fn forget_idle(&self) {
        self.by_address.forget_idle();
        self.by_subject.forget_idle();
    }
}

/// A keyed rate limiter that holds at most `max` keys: before a key goes in when full,
/// it forgets the keys whose limits have refilled, and, should it still be full (a
/// flood of fresh keys within one refill), all of them. Between the chore's passes a
/// flood would otherwise grow it with the request rate; a limiter that forgets is
/// better than one that runs out of memory.
struct BoundedLimiter<K: std::hash::Hash + Eq + Clone> {
    quota: Quota,
    max: usize,
    limiter: std::sync::RwLock<DefaultKeyedRateLimiter<K>>,
}

impl<K: std::hash::Hash + Eq + Clone> BoundedLimiter<K> {
    fn new(quota: Quota, max: usize) -> Self {
        BoundedLimiter {
            quota,
            max,
            limiter: std::sync::RwLock::new(RateLimiter::keyed(quota)),
        }
    }

    fn check(&self, key: &K) -> Result<(), Duration> {
        if self.len() >= self.max {
            let mut limiter = self
                .limiter
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            limiter.retain_recent();
            if limiter.len() >= self.max {
                *limiter = RateLimiter::keyed(self.quota);
            }
        }
        let limiter = self
            .limiter
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = DefaultClock::default().now();
        limiter
            .check_key(key)
            .map_err(|not_until| not_until.wait_time_from(now))
    }

    fn forget_idle(&self) {
        self.limiter
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .retain_recent();
    }

    fn len(&self) -> usize {
        self.limiter
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
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
    /// Checks of a secret from this address still under way (see [`GuessLimiter`]):
    /// each counts as a failure until it is known not to be one.
    in_flight: u32,
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
        let windows = self.windows();
        let window = windows.get(&address_key(address))?;
        let age = window.started.elapsed();
        (window.failures >= self.per_minute && age < FAILURE_WINDOW).then(|| FAILURE_WINDOW - age)
    }

    /// Counts one failure of `address`.
    pub fn failed(&self, address: IpAddr) {
        let mut windows = self.windows();
        let window = Self::current(&mut windows, address_key(address));
        window.failures = window.failures.saturating_add(1);
    }

    /// Before a check of a secret from `address`: refused (with how long to wait) when
    /// its failures this minute and its checks under way reach the limit; else the
    /// check counts as under way until [`FailedAttempts::settle`].
    fn reserve(&self, address: IpAddr) -> Result<(), Duration> {
        let mut windows = self.windows();
        let window = Self::current(&mut windows, address_key(address));
        if window.failures.saturating_add(window.in_flight) >= self.per_minute {
            // Refused for the rest of its minute; a check under way that turns out
            // right frees its place sooner, so a client told to wait for it is told
            // at most a second while checks are under way.
            let rest = FAILURE_WINDOW.saturating_sub(window.started.elapsed());
            return Err(if window.failures >= self.per_minute {
                rest
            } else {
                rest.min(Duration::from_secs(1))
            });
        }
        window.in_flight += 1;
        Ok(())
    }

    /// A check [`FailedAttempts::reserve`]d for `address` ended, a failure or not.
    fn settle(&self, address: IpAddr, failed: bool) {
        let mut windows = self.windows();
        let window = Self::current(&mut windows, address_key(address));
        window.in_flight = window.in_flight.saturating_sub(1);
        if failed {
            window.failures = window.failures.saturating_add(1);
        }
    }

    fn windows(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<IpAddr, FailureWindow>> {
        self.windows
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The window of `key` now: a new one when its minute is over (checks under way
    /// carry over into it).
    fn current(
        windows: &mut std::collections::HashMap<IpAddr, FailureWindow>,
        key: IpAddr,
    ) -> &mut FailureWindow {
        make_room(windows, MAX_REMEMBERED_ADDRESSES, |window| {
            window.started.elapsed() < FAILURE_WINDOW || window.in_flight > 0
        });
        let now = std::time::Instant::now();
        let window = windows.entry(key).or_insert(FailureWindow {
            started: now,
            failures: 0,
            in_flight: 0,
        });
        if window.started.elapsed() >= FAILURE_WINDOW {
            *window = FailureWindow {
                started: now,
                failures: 0,
                in_flight: window.in_flight,
            };
        }
        window
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
    /// to wait) when the address's failures this minute and its checks under way reach
    /// the limit; else, once the subject's backoff has passed and a check slot is free,
    /// an admission. Until it is settled ([`Admission::failed`] or
    /// [`Admission::succeeded`]) or dropped, the check counts against the address.
    pub async fn admit(
        &self,
        address: Option<IpAddr>,
        subject: &str,
    ) -> Result<Admission<'_>, Duration> {
        if let Some(address) = address {
            self.by_address.reserve(address)?;
        }
        // From here the reservation is the admission's to give back, however this ends.
        let mut admission = Admission {
            limiter: self,
            address,
            check_slot: None,
        };
        let backoff = self.backoff(subject);
        if !backoff.is_zero() {
            tokio::time::sleep(backoff).await;
        }
        admission.check_slot = Some(
            self.checks
                .acquire()
                .await
                .map_err(|_| Duration::from_secs(1))?,
        );
        Ok(admission)
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

    /// A wrong secret about `subject` (its address is counted by the admission).
    fn subject_failed(&self, subject: &str) {
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
    fn subject_succeeded(&self, subject: &str) {
        self.by_subject
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&subject_key(subject));
    }
}

/// Leave to check one secret (see [`GuessLimiter::admit`]): it holds one of the check
/// slots until [`Admission::checked`], and counts against its address until settled.
/// Dropped unsettled (the check could not be made), it counts as nothing.
pub struct Admission<'a> {
    limiter: &'a GuessLimiter,
    /// The address it counts against, until settled.
    address: Option<IpAddr>,
    check_slot: Option<tokio::sync::SemaphorePermit<'a>>,
}

impl Admission<'_> {
    /// The secret has been checked: the slot is free for another check (the attempt
    /// still counts against its address until settled).
    pub fn checked(&mut self) {
        self.check_slot = None;
    }

    /// The secret was wrong: one failure for the address and for `subject`.
    pub fn failed(mut self, subject: &str) {
        if let Some(address) = self.address.take() {
            self.limiter.by_address.settle(address, true);
        }
        self.limiter.subject_failed(subject);
    }

    /// The secret was right: the subject's failures are forgotten.
    pub fn succeeded(mut self, subject: &str) {
        if let Some(address) = self.address.take() {
            self.limiter.by_address.settle(address, false);
        }
        self.limiter.subject_succeeded(subject);
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if let Some(address) = self.address.take() {
            self.limiter.by_address.settle(address, false);
        }
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
            let from = format!("198.51.100.{n}").parse().unwrap();
            limiter
                .admit(Some(from), owner)
                .await
                .unwrap()
                .failed(owner);
        }
        assert_eq!(limiter.backoff("owner@example.com"), BACKOFF_START);
        limiter.subject_failed(owner);
        assert_eq!(limiter.backoff(owner), BACKOFF_START * 2);
        for _ in 0..20 {
            limiter.subject_failed(owner);
        }
        assert_eq!(limiter.backoff(owner), BACKOFF_CAP, "capped, not locked");
        // A clean address is admitted (after the wait).
        let clean: IpAddr = "203.0.113.50".parse().unwrap();
        limiter
            .admit(Some(clean), owner)
            .await
            .unwrap()
            .succeeded(owner);
        assert_eq!(limiter.backoff(owner), Duration::ZERO);
        // Keys are bounded: a megabyte subject is kept as 254 characters.
        limiter.subject_failed(&"x".repeat(1_000_000));
        let longest = limiter
            .by_subject
            .lock()
            .unwrap()
            .keys()
            .map(String::len)
            .max();
        assert_eq!(longest, Some(254));
    }

    #[tokio::test]
    async fn parallel_guesses_from_one_address_get_no_more_checks_than_the_limit() {
        // 200 wrong guesses at once from one address, each check taking a while (a
        // password hash): the checks under way count, so no more than the limit of them
        // is ever let through, where counting failures only after the check let all 200.
        let limiter = std::sync::Arc::new(GuessLimiter::new(10, 2));
        let attacker: IpAddr = "192.0.2.66".parse().unwrap();
        let admitted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut guesses = tokio::task::JoinSet::new();
        for n in 0..200 {
            let (limiter, admitted) = (limiter.clone(), admitted.clone());
            guesses.spawn(async move {
                let subject = format!("guess{n}@example.com");
                if let Ok(mut admission) = limiter.admit(Some(attacker), &subject).await {
                    admitted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    admission.checked();
                    admission.failed(&subject);
                }
            });
        }
        while guesses.join_next().await.is_some() {}
        assert_eq!(admitted.load(std::sync::atomic::Ordering::SeqCst), 10);
        assert!(limiter.by_address.blocked(attacker).is_some());
        // A check that could not be made (dropped unsettled) gives its place back.
        let other: IpAddr = "192.0.2.67".parse().unwrap();
        for _ in 0..20 {
            drop(limiter.admit(Some(other), "x@example.com").await.unwrap());
        }
        assert!(limiter.by_address.blocked(other).is_none());
    }

    #[test]
    fn an_ipv6_client_is_limited_by_its_64_and_a_mapped_ipv4_as_itself() {
        let key = |text: &str| address_key(text.parse().unwrap());
        assert_eq!(
            key("2001:db8:1:2:aaaa::1"),
            key("2001:db8:1:2:ffff:ffff:ffff:ffff")
        );
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:192.0.2.7"), key("192.0.2.7"));
        assert_eq!(key("192.0.2.7"), "192.0.2.7".parse::<IpAddr>().unwrap());

        // Bookings and access requests: one /64 shares one budget.
        let limiter = AttemptLimiter::per_hour(NonZeroU32::new(3).unwrap());
        for n in 0..3 {
            let address = format!("2001:db8:1:2::{n:x}").parse().unwrap();
            assert!(
                limiter
                    .check(Some(address), &format!("v{n}@example.com"))
                    .is_ok()
            );
        }
        let same_64 = "2001:db8:1:2:dead:beef:0:1".parse().unwrap();
        assert!(limiter.check(Some(same_64), "w@example.com").is_err());
        let next_64 = "2001:db8:1:3::1".parse().unwrap();
        assert!(limiter.check(Some(next_64), "w@example.com").is_ok());

        // Sign-in failures too.
        let guesses = FailedAttempts::per_minute(2);
        guesses.failed("2001:db8:9::1".parse().unwrap());
        guesses.failed("2001:db8:9::2".parse().unwrap());
        assert!(
            guesses
                .blocked("2001:db8:9::ffff".parse().unwrap())
                .is_some()
        );
    }

    #[test]
    fn a_flood_of_fresh_keys_keeps_the_limiter_bounded() {
        let limiter = BoundedLimiter::new(Quota::per_hour(NonZeroU32::new(5).unwrap()), 1_000);
        for n in 0..10_000u32 {
            let _ = limiter.check(&n);
            assert!(limiter.len() <= 1_000, "{} keys after {n}", limiter.len());
        }
        // A key that used its share is still refused while the map is not full.
        let fresh = BoundedLimiter::new(Quota::per_hour(NonZeroU32::new(1).unwrap()), 1_000);
        assert!(fresh.check(&1).is_ok());
        assert!(fresh.check(&1).is_err());
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
