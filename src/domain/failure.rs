//! The one way a domain error writes its internal cases. Each domain error (an
//! approval's, a booking's, the corpus's…) says in words what the caller got wrong, and
//! has one more case for what went wrong on our side: `Internal(anyhow::Error)`, which
//! the doors answer as a failure of ours (500, or a tool error) with the words kept in
//! the log, never sent. [`failures_on_our_side!`] writes the conversions into that case
//! for the failures every operation can meet (the database, the job engine), so `?`
//! works on them in each operation and all of them read alike.

/// `failures_on_our_side!(SomeError);` for an error enum that has the case
/// `#[error(transparent)] Internal(#[from] anyhow::Error)`: a `sqlx::Error` and a
/// `standmeet_jobs::Error` become that case, with their chain of causes kept.
macro_rules! failures_on_our_side {
    ($($error:ty),+ $(,)?) => {$(
        /// The database failed: a failure on our side.
        impl From<sqlx::Error> for $error {
            fn from(err: sqlx::Error) -> Self {
                Self::Internal(err.into())
            }
        }

        /// The job engine failed to insert or read a job: a failure on our side.
        impl From<standmeet_jobs::Error> for $error {
            fn from(err: standmeet_jobs::Error) -> Self {
                Self::Internal(err.into())
            }
        }
    )+};
}
pub(crate) use failures_on_our_side;
