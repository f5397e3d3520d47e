//! Trying a database statement again until a deadline, with the pauses every loop of
//! the engine shares (a waiter's read, the completer's write, a claim's second write):
//! 20 ms at first, doubling, at most a second, and never past the deadline. A database
//! that fails over comes back within seconds; a pause that grows keeps a database that
//! stays away from being asked hundreds of times a second by every process.

use std::time::Duration;

use tokio::time::Instant;

const FIRST_PAUSE: Duration = Duration::from_millis(20);
const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// The pauses between tries of one statement, until `deadline`.
pub(crate) struct TryAgain {
    pause: Duration,
    deadline: Instant,
}

impl TryAgain {
    pub(crate) fn until(deadline: Instant) -> Self {
        TryAgain {
            pause: FIRST_PAUSE,
            deadline,
        }
    }

    /// The pause before the next try (cut short at the deadline), or `None` when the
    /// deadline has passed: give up.
    pub(crate) fn next_pause(&mut self) -> Option<Duration> {
        let left = self.deadline.checked_duration_since(Instant::now())?;
        if left.is_zero() {
            return None;
        }
        let pause = self.pause.min(left);
        self.pause = (self.pause * 2).min(LONGEST_PAUSE);
        Some(pause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_a_second() {
        let mut again = TryAgain::until(Instant::now() + Duration::from_secs(3_600));
        let pauses: Vec<u128> = (0..9)
            .map(|_| again.next_pause().unwrap().as_millis())
            .collect();
        assert_eq!(pauses, [20, 40, 80, 160, 320, 640, 1_000, 1_000, 1_000]);
    }

    #[test]
    fn a_pause_ends_at_the_deadline_and_none_comes_after_it() {
        let deadline = Instant::now() + Duration::from_millis(5);
        let mut again = TryAgain::until(deadline);
        let pause = again.next_pause().expect("before the deadline");
        assert!(pause <= Duration::from_millis(5), "{pause:?}");
        let passed = Instant::now() - Duration::from_millis(1);
        assert_eq!(TryAgain::until(passed).next_pause(), None);
    }
}
