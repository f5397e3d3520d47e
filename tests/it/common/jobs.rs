//! Helpers for job tests: the engine's test kit (an engine with quick timings, test job
//! kinds, waiting for a job's state), and the engine as StandMeet runs it.

pub use standmeet_jobs_testkit::*;
