//! A job keeps the trace context of its insert, and each attempt is handed it as its
//! span's parent, with the outcome at its end. (A test binary of its own: carrying
//! traces is for the whole process.)

mod common;

use std::sync::{Arc, Mutex};

use common::jobs::{
    Flaky, FlakyArgs, RunCounts, client, insert, quick_config, start_engine, test_registry,
    wait_for_state,
};
use sqlx::PgPool;
use standmeet_jobs::JobState;
use standmeet_jobs::attempt::AttemptContext;
use standmeet_jobs::builtin::Noop;
use standmeet_jobs::trace::{JobTraces, carry_traces};

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// What the engine told the traces: each attempt's job, number, queue and parent as it
/// began, and its outcome and error as it ended.
#[derive(Clone, Default)]
struct Told(Arc<Mutex<Vec<String>>>);

impl Told {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl JobTraces for Told {
    fn insert_span(&self, kind: &str, queue: &str) -> tracing::Span {
        self.0
            .lock()
            .unwrap()
            .push(format!("insert {kind} on {queue}"));
        tracing::Span::none()
    }

    fn current_traceparent(&self) -> Option<String> {
        Some(TRACEPARENT.to_string())
    }

    fn attempt_span(
        &self,
        attempt: &AttemptContext,
        queue: &str,
        parent: Option<&str>,
    ) -> tracing::Span {
        self.0.lock().unwrap().push(format!(
            "attempt {} of job {} ({}) on {queue} under {parent:?}",
            attempt.attempt, attempt.id, attempt.kind
        ));
        tracing::Span::none()
    }

    fn attempt_ended(&self, _: &tracing::Span, outcome: &str, error: Option<&str>) {
        self.0
            .lock()
            .unwrap()
            .push(format!("ended {outcome} {error:?}"));
    }
}

#[sqlx::test]
async fn each_attempt_is_a_child_of_the_insert_and_says_how_it_ended(pool: PgPool) {
    let told = Told::default();
    assert!(carry_traces(told.clone()));

    let noop = insert::<Noop>(&pool, &serde_json::json!({})).await.unwrap();
    // Enough jobs that most are taken by claims, not by a quiet queue's one-call take
    // (the two read the stored context in different statements).
    let mut many = Vec::new();
    for n in 0..30 {
        many.push(
            insert::<Noop>(&pool, &serde_json::json!({ "n": n }))
                .await
                .unwrap(),
        );
    }
    let flaky = insert::<Flaky>(&pool, &FlakyArgs { succeed_on: 2 })
        .await
        .unwrap();
    let stored = client(&pool).get(noop).await.unwrap().unwrap();
    assert_eq!(stored.trace_context.as_deref(), Some(TRACEPARENT));
    assert_eq!(stored.trace_id(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));

    let _engine = start_engine(&pool, test_registry(RunCounts::default()), quick_config(4)).await;
    wait_for_state(&pool, noop, JobState::Completed).await;
    wait_for_state(&pool, flaky, JobState::Completed).await;
    for &id in &many {
        wait_for_state(&pool, id, JobState::Completed).await;
    }

    let lines = told.lines();
    let under = format!("under Some({TRACEPARENT:?})");
    let of = |job| {
        let attempt = format!("of job {job} ");
        let begun = lines
            .iter()
            .position(|line| line.contains(&attempt))
            .unwrap_or_else(|| panic!("no attempt of job {job}: {lines:#?}"));
        (begun, lines[begun].clone())
    };
    let (_, noop_attempt) = of(noop);
    assert!(noop_attempt.starts_with("attempt 1 "), "{noop_attempt}");
    assert!(noop_attempt.ends_with(&under), "{noop_attempt}");
    assert!(
        lines.contains(&"insert system.noop on default".to_string()),
        "{lines:#?}"
    );

    // Flaky fails its first attempt and completes its second, each under the insert.
    let flaky_attempts: Vec<&String> = lines
        .iter()
        .filter(|line| line.contains(&format!("of job {flaky} ")))
        .collect();
    assert_eq!(flaky_attempts.len(), 2, "{lines:#?}");
    assert!(flaky_attempts.iter().all(|line| line.ends_with(&under)));
    for &id in &many {
        let (_, attempt) = of(id);
        assert!(attempt.ends_with(&under), "{attempt}");
    }
    let endings: Vec<&String> = lines.iter().filter(|l| l.starts_with("ended")).collect();
    assert_eq!(endings.len(), 33, "{lines:#?}");
    assert!(
        endings.contains(&&"ended retryable Some(\"attempt 1 failed on purpose\")".to_string()),
        "{lines:#?}"
    );
    assert_eq!(
        endings
            .iter()
            .filter(|line| line.as_str() == "ended completed None")
            .count(),
        32,
        "{lines:#?}"
    );
}
