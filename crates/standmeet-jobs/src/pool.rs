//! The engine's connection pools: the options every one of them is made with, and the
//! connections the engine needs beside those its claims hold. Below everything that
//! holds connections (`kept`, `config`'s sizing, `engine`), so that none of them needs
//! the engine that puts them together.

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;

/// Connections of the engine's own pool, beside the one it is given: the completer's
/// writers (2), claims' traces (1), lease renewal and the other chores (1 each at
/// most). They never wait behind claims or handlers for a connection: a renewal that
/// cannot run in time would let the rescuer take running jobs back, and a claim whose
/// trace waited would hold its own connection meanwhile.
pub(crate) const CONTROL_CONNECTIONS: u32 = 6;

/// Connections the engine's pool must have beyond one per claim that its queues may
/// keep open at once, for handlers' own queries and a claim's second try.
pub(crate) const CONNECTIONS_BESIDE_CLAIMS: u32 = 2;

/// A connection of the engine's pools idle longer than this is tried (a ping) before
/// it is handed out; one used more recently is handed out as it is.
pub(crate) const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// Options for the engine's pools (the one it is given should be made from these
/// too): sqlx tries every connection with a round trip when it is handed out, and
/// again when it comes back. A claim, a quiet job's take and an outcome's write are a
/// round trip each: the first try doubled them, and it is what an idle job waited for
/// most. So only a connection that sat idle for [`PING_AFTER_IDLE`] is tried first; one
/// that broke since it came back (a database restart, a cut) fails its statement, which
/// the engine's every write already handles as a passing error and tries again, on
/// another connection (sqlx drops a connection that fails).
pub(crate) fn pool_options() -> PgPoolOptions {
    PgPoolOptions::new()
        .test_before_acquire(false)
        .before_acquire(|connection, meta| {
            Box::pin(async move {
                if meta.idle_for > PING_AFTER_IDLE {
                    sqlx::Connection::ping(connection).await?;
                }
                Ok(true)
            })
        })
}
