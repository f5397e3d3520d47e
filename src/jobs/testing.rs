//! The steps a worker takes, for the engine's own tests only: they play a worker that
//! fetches jobs and then vanishes, answers late, or is rescued, which a running engine
//! never does on purpose. Nothing in StandMeet calls this (`tests/architecture.rs`
//! checks that); everything else goes through [`JobClient`](super::JobClient).

#[doc(hidden)]
pub use super::store::{
    FINISHED_PER_MINUTE_SQL, MAX_DELAY, MAX_ERROR_CHARS, Outcome, job_delete_finished,
    job_fetch_available, job_record_outcomes, job_rescue_expired,
};
#[doc(hidden)]
pub use super::claim::{SLOT_WAIT, slot_lock_key};
