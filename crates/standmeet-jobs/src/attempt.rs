//! Which attempt the code running now belongs to, for log lines.
//!
//! Each attempt runs inside a task-local [`AttemptContext`], not inside a `tracing`
//! span of its own. With `tracing-subscriber`'s fmt layer a span costs about 300 ns
//! per job whether or not anything is logged inside it (allocated in the registry,
//! its fields formatted up front, a filter lookup on every poll); at 80,000 jobs/s
//! that was a tenth of the drain (docs/benchmarks.md, 2026-12-03). A task-local costs
//! a pointer swap per poll, and a log formatter asks [`current_attempt`] only for the
//! lines that are actually written (StandMeet's own adds the job's id, kind and
//! attempt to every line written inside an attempt, in text and in JSON).

use std::borrow::Cow;

use crate::types::JobId;

/// The job attempt a line of code runs in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptContext {
    /// The job.
    pub id: JobId,
    /// Borrowed from the registry when this process knows the kind (always, but for a
    /// registry that changed under a running producer).
    pub kind: Cow<'static, str>,
    /// The attempt's number, from 1.
    pub attempt: i16,
}

tokio::task_local! {
    static CURRENT: AttemptContext;
}

/// The attempt the calling task runs (`None` outside the engine's attempts, and in
/// tasks a handler spawns: they are not the attempt's task).
pub fn current_attempt() -> Option<AttemptContext> {
    CURRENT.try_with(Clone::clone).ok()
}

/// Runs `future` as (part of) the attempt `context`. (Not an `async fn`: that would
/// wrap the scope in a future of its own, which holds `future` twice over, and every
/// attempt's task carries its size.)
pub(crate) fn in_attempt<F: Future>(
    context: AttemptContext,
    future: F,
) -> impl Future<Output = F::Output> {
    CURRENT.scope(context, future)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_attempt_is_seen_inside_it_and_nowhere_else() {
        assert_eq!(current_attempt(), None);
        let context = AttemptContext {
            id: JobId(7),
            kind: "system.noop".into(),
            attempt: 2,
        };
        let seen = in_attempt(context.clone(), async {
            tokio::task::yield_now().await;
            let inside = current_attempt();
            let spawned = tokio::spawn(async { current_attempt() }).await.unwrap();
            (inside, spawned)
        })
        .await;
        assert_eq!(seen, (Some(context), None));
        assert_eq!(current_attempt(), None);
    }
}
