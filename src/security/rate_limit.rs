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

#[cfg(test)]
mod tests {
    use super::*;

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
