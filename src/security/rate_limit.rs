//! Attempt limits for sign-in, access codes and access requests: a burst of N, refilled
//! at N a minute (or an hour), counted separately per client address and per email, so
//! that neither one address trying many emails nor many addresses trying one email
//! gets far.
//!
//! The counts live in this process's memory: a restart forgets them, and each copy of
//! StandMeet counts on its own. That bounds guessing to N a minute per copy, which is
//! what matters against password guessing.

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
    /// case). Answers how long to wait when either limit is used up.
    pub fn check(&self, address: Option<IpAddr>, subject: &str) -> Result<(), Duration> {
        let now = DefaultClock::default().now();
        let mut wait = Duration::ZERO;
        if let Some(address) = address
            && let Err(not_until) = self.by_address.check_key(&address)
        {
            wait = wait.max(not_until.wait_time_from(now));
        }
        let subject = subject.trim().to_lowercase();
        if !subject.is_empty()
            && let Err(not_until) = self.by_subject.check_key(&subject)
        {
            wait = wait.max(not_until.wait_time_from(now));
        }
        if wait.is_zero() { Ok(()) } else { Err(wait) }
    }

    /// Forgets keys whose limits have fully refilled, so memory stays bounded.
    pub fn forget_idle(&self) {
        self.by_address.retain_recent();
        self.by_subject.retain_recent();
    }
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
        let windows = self.windows.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let window = windows.get(&address)?;
        let age = window.started.elapsed();
        (window.failures >= self.per_minute && age < FAILURE_WINDOW)
            .then(|| FAILURE_WINDOW - age)
    }

    /// Counts one failure of `address`.
    pub fn failed(&self, address: IpAddr) {
        let mut windows = self.windows.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if windows.len() >= MAX_REMEMBERED_ADDRESSES {
            windows.retain(|_, window| window.started.elapsed() < FAILURE_WINDOW);
            if windows.len() >= MAX_REMEMBERED_ADDRESSES {
                windows.clear();
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(wait > Duration::from_secs(50) && wait <= FAILURE_WINDOW, "{wait:?}");
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
