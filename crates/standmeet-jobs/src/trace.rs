//! A job keeps the trace that inserted it, and its attempts are spans of that trace.
//!
//! The engine knows no trace exporter: an application that exports traces gives it a
//! [`JobTraces`] once ([`carry_traces`]), which turns "the span running now" into a W3C
//! `traceparent` to store with a job at its insert, and a stored one back into the
//! parent of each attempt's span, whichever process runs it and however much later.
//!
//! Without one (the default) nothing is stored and an attempt runs in no span at all
//! (see `attempt` for why the engine keeps spans off its hot path): the cost of this
//! module is then one check of a `OnceLock` per insert and per attempt.

use std::sync::OnceLock;

use crate::attempt::AttemptContext;

/// How an application that exports traces carries them through its jobs.
pub trait JobTraces: Send + Sync + 'static {
    /// The span of one insert of a `kind` job on `queue`, inside the caller's span.
    fn insert_span(&self, kind: &str, queue: &str) -> tracing::Span;

    /// The W3C `traceparent` of the span entered now, to store with a job inserted now
    /// (`None`: there is no sampled trace to carry).
    fn current_traceparent(&self) -> Option<String>;

    /// The span that `attempt` of a job on `queue` runs in: a child of `parent` (the
    /// `traceparent` stored with the job), or the root of a trace of its own. The engine
    /// tells its end through [`JobTraces::attempt_ended`].
    fn attempt_span(
        &self,
        attempt: &AttemptContext,
        queue: &str,
        parent: Option<&str>,
    ) -> tracing::Span;

    /// The attempt of `span` ended as `outcome` (the state it leaves the job in, such
    /// as `completed` or `retryable`), with `error` when it failed.
    fn attempt_ended(&self, span: &tracing::Span, outcome: &str, error: Option<&str>);
}

static TRACES: OnceLock<Box<dyn JobTraces>> = OnceLock::new();

/// Has this process's jobs carry traces through `traces`, from now on. Only the first
/// call counts (as with a global `tracing` subscriber); answers whether it did.
pub fn carry_traces(traces: impl JobTraces) -> bool {
    TRACES.set(Box::new(traces)).is_ok()
}

/// The traces this process carries, if it carries any.
pub(crate) fn traces() -> Option<&'static dyn JobTraces> {
    TRACES.get().map(|traces| &**traces)
}

/// The trace id of a W3C `traceparent` (`00-<trace id>-<span id>-<flags>`), as the
/// 32 hex digits a trace viewer looks it up by; `None` for anything else.
pub fn trace_id_of(traceparent: &str) -> Option<&str> {
    let mut parts = traceparent.split('-');
    let (_version, trace_id) = (parts.next()?, parts.next()?);
    let valid = trace_id.len() == 32
        && trace_id.bytes().all(|byte| byte.is_ascii_hexdigit())
        && trace_id.bytes().any(|byte| byte != b'0');
    valid.then_some(trace_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_id_is_read_from_a_traceparent_and_nothing_else() {
        assert_eq!(
            trace_id_of("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(trace_id_of(""), None);
        assert_eq!(trace_id_of("00-4bf92f35-00f067aa0ba902b7-01"), None);
        assert_eq!(
            trace_id_of("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            None
        );
        assert_eq!(
            trace_id_of("00-4bf92f3577b34da6a3ce929d0e0e473z-00f067aa0ba902b7-01"),
            None
        );
    }
}
