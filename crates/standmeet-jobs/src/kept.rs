//! Connections kept between claims, out of their pool, and the claim's transaction on
//! one of them.
//!
//! sqlx tries every connection with a round trip (a ping: a `Sync` and its answer, in
//! a task of its own) each time it goes back to its pool. A claim used to take two
//! connections and give both back (its transaction's, and the one its trace commits
//! on), and a quiet queue's one-call take one: a ping each, which woke a PostgreSQL
//! backend and the other worker thread while the job ran (without them, commit → woken
//! p50 and p99 of single jobs came out about a tenth lower; docs/benchmarks.md).
//! So a claim's connections come from [`KeptConnections`] and go back there when their
//! work ended cleanly (committed, or rolled back, with no statement cut off), for the
//! next claim to use as they are. A connection whose statement failed, or whose work
//! was cut off, goes back to its pool instead (dropped), which tries it and drops it
//! when it is broken: the next claim then takes a fresh one.
//!
//! What keeps this as safe as the pool's way:
//! - a kept connection is idle and outside any transaction ([`ClaimTransaction`] gives
//!   its connection back only after its `COMMIT` or `ROLLBACK` answered; dropped while
//!   open, it closes the connection, and PostgreSQL rolls the transaction back);
//! - one kept longer than [`PING_AFTER_IDLE`] is not used as it is but goes back to
//!   the pool, which tries it before it hands it out again, as for any connection that
//!   sat idle that long;
//! - at most `most` are kept, no more than the claims the queues may keep open at
//!   once (the pool is sized for those), and the engine lets go of them all when a
//!   claim finds its queue empty and when it stops (a pool waits for its connections
//!   when it closes);
//! - the pool's `max_lifetime` still holds: under steady load a connection would be
//!   kept, taken and kept again and never go back to the pool, which closes a
//!   connection past its lifetime only when it comes back. So one taken from the pool
//!   longer ago than that lifetime is not kept but given back, and the pool closes it
//!   (it was opened before it was taken, so it is past its lifetime too).

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use tokio::time::Instant;

use super::pool::PING_AFTER_IDLE;

/// A connection out of its pool ([`KeptConnections::take`]), with when it came out.
pub(crate) struct KeptConnection {
    connection: PoolConnection<Postgres>,
    from_pool_at: Instant,
}

impl Deref for KeptConnection {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        &self.connection
    }
}

impl DerefMut for KeptConnection {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.connection
    }
}

/// Connections of one pool kept out of it between uses (see the module documentation).
pub(crate) struct KeptConnections {
    pool: PgPool,
    /// The most kept at once.
    most: usize,
    /// How long a kept connection is used as it is ([`PING_AFTER_IDLE`]).
    fresh_for: Duration,
    /// The pool's `max_lifetime`: a connection out of the pool longer is given back.
    lifetime: Option<Duration>,
    /// The kept ones, the most recently kept last, each with when it was kept.
    idle: Mutex<Vec<(KeptConnection, Instant)>>,
}

impl KeptConnections {
    pub(crate) fn new(pool: PgPool, most: usize) -> KeptConnections {
        KeptConnections {
            lifetime: pool.options().get_max_lifetime(),
            pool,
            most,
            fresh_for: PING_AFTER_IDLE,
            idle: Mutex::new(Vec::with_capacity(most)),
        }
    }

    /// The connection kept last, when it was kept less than [`PING_AFTER_IDLE`] ago;
    /// otherwise one from the pool (the stale ones go back to it).
    pub(crate) async fn take(&self) -> Result<KeptConnection, sqlx::Error> {
        let stale = {
            let mut idle = self.idle.lock().expect("not poisoned");
            match idle.pop() {
                Some((connection, kept_at)) if kept_at.elapsed() <= self.fresh_for => {
                    return Ok(connection);
                }
                // The others were kept earlier still.
                Some(stale) => std::iter::once(stale).chain(idle.drain(..)).collect(),
                None => Vec::new(),
            }
        };
        // Dropped outside the lock: each goes back to the pool in a task of its own.
        drop(stale);
        Ok(KeptConnection {
            connection: self.pool.acquire().await?,
            from_pool_at: Instant::now(),
        })
    }

    /// Keeps `connection`, idle and outside any transaction, for the next
    /// [`take`](Self::take); back to the pool when `most` are kept already, or when it
    /// came out of the pool longer ago than the pool's `max_lifetime`.
    pub(crate) fn keep(&self, connection: KeptConnection) {
        if self
            .lifetime
            .is_some_and(|lifetime| connection.from_pool_at.elapsed() >= lifetime)
        {
            drop(connection);
            return;
        }
        let mut idle = self.idle.lock().expect("not poisoned");
        if idle.len() < self.most {
            idle.push((connection, Instant::now()));
            return;
        }
        drop(idle);
        drop(connection);
    }

    /// Gives every kept connection back to the pool.
    pub(crate) fn let_go(&self) {
        let kept = std::mem::take(&mut *self.idle.lock().expect("not poisoned"));
        drop(kept);
    }
}

/// A claim's transaction on a connection of its own ([`KeptConnections::take`]), begun,
/// committed and rolled back by statement, so that the connection is handed back
/// afterwards to be kept (sqlx's `Transaction` would give it to the pool). Dropped
/// while open (its task was cut off, or its `COMMIT` failed), it closes its connection,
/// and PostgreSQL rolls the transaction back, its locks and its claim slot with it.
pub(crate) struct ClaimTransaction {
    /// `None` only once the transaction ended and handed its connection back.
    connection: Option<KeptConnection>,
}

impl ClaimTransaction {
    /// Begins with `begin`, simple text that starts with `BEGIN` and may go on with more
    /// statements in the same round trip (their rows are not read).
    pub(crate) async fn begin(
        connection: KeptConnection,
        begin: &str,
    ) -> Result<ClaimTransaction, sqlx::Error> {
        debug_assert!(begin.starts_with("BEGIN"));
        // Open from before the `BEGIN` is sent: should it or a statement after it fail,
        // or this future be dropped meanwhile, the connection closes.
        let mut transaction = ClaimTransaction {
            connection: Some(connection),
        };
        sqlx::Executor::execute(&mut *transaction, sqlx::raw_sql(begin)).await?;
        Ok(transaction)
    }

    /// Commits, and answers the connection, idle again.
    pub(crate) async fn commit(self) -> Result<KeptConnection, sqlx::Error> {
        self.end("COMMIT").await
    }

    /// Rolls back, and answers the connection, idle again.
    pub(crate) async fn rollback(self) -> Result<KeptConnection, sqlx::Error> {
        self.end("ROLLBACK").await
    }

    async fn end(mut self, statement: &'static str) -> Result<KeptConnection, sqlx::Error> {
        // On an error (or when this future is dropped) `self` is dropped still open,
        // and its connection closes.
        sqlx::Executor::execute(&mut *self, sqlx::raw_sql(statement)).await?;
        Ok(self.connection.take().expect("open until it ends"))
    }
}

impl Deref for ClaimTransaction {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        self.connection.as_ref().expect("open until it ends")
    }
}

impl DerefMut for ClaimTransaction {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.connection.as_mut().expect("open until it ends")
    }
}

impl Drop for ClaimTransaction {
    fn drop(&mut self) {
        if let Some(connection) = &mut self.connection {
            // Still open: whatever was said on it last may be unanswered, so the
            // connection is not given back as it is but closed (sqlx closes it when it
            // is dropped), which ends the transaction in PostgreSQL.
            connection.connection.close_on_drop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::postgres::PgPoolOptions;

    async fn backend_of(connection: &mut PgConnection) -> i32 {
        sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(connection)
            .await
            .unwrap()
    }

    fn kept_len(kept: &KeptConnections) -> usize {
        kept.idle.lock().unwrap().len()
    }

    /// Waits (up to 10 s) until `pool` has `idle` idle connections.
    async fn until_idle_in(pool: &PgPool, idle: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while pool.num_idle() != idle {
            assert!(
                Instant::now() < deadline,
                "the pool never had {idle} idle connections"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[sqlx::test]
    async fn a_kept_connection_is_the_next_one_taken_but_never_more_than_most(pool: PgPool) {
        let kept = KeptConnections::new(pool.clone(), 2);
        let mut first = kept.take().await.unwrap();
        let backend = backend_of(&mut first).await;
        kept.keep(first);
        let mut again = kept.take().await.unwrap();
        assert_eq!(backend_of(&mut again).await, backend);
        assert_eq!(kept_len(&kept), 0);

        let (second, third) = (kept.take().await.unwrap(), kept.take().await.unwrap());
        kept.keep(again);
        kept.keep(second);
        kept.keep(third);
        assert_eq!(kept_len(&kept), 2, "the third went back to the pool");
        until_idle_in(&pool, 1).await;

        kept.let_go();
        assert_eq!(kept_len(&kept), 0);
        until_idle_in(&pool, 3).await;
    }

    #[sqlx::test]
    async fn a_connection_kept_too_long_goes_back_to_the_pool_instead(pool: PgPool) {
        let kept = KeptConnections {
            fresh_for: Duration::ZERO,
            ..KeptConnections::new(pool.clone(), 2)
        };
        let (first, second) = (kept.take().await.unwrap(), kept.take().await.unwrap());
        kept.keep(first);
        kept.keep(second);
        let mut taken = kept.take().await.unwrap();
        assert_eq!(kept_len(&kept), 0, "both stale ones went back");
        backend_of(&mut taken).await;
        drop(taken);
        // Every connection the pool opened is back in it, idle.
        let deadline = Instant::now() + Duration::from_secs(10);
        while pool.num_idle() != pool.size() as usize {
            assert!(Instant::now() < deadline, "a connection never came back");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(pool.size() >= 2);
    }

    #[sqlx::test]
    async fn a_connection_kept_past_the_pools_lifetime_is_given_back_and_closed(pool: PgPool) {
        let short_lived = PgPoolOptions::new()
            .max_lifetime(Duration::from_millis(300))
            .connect_with((*pool.connect_options()).clone())
            .await
            .unwrap();
        let kept = KeptConnections::new(short_lived.clone(), 1);
        let mut first = kept.take().await.unwrap();
        let backend = backend_of(&mut first).await;
        kept.keep(first);
        // Steady load: taken and kept again and again, it never idles in the pool; past
        // the lifetime it is replaced all the same.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut connection = kept.take().await.unwrap();
            let now = backend_of(&mut connection).await;
            kept.keep(connection);
            if now != backend {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the same connection outlived the pool's lifetime"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The advisory locks `connection`'s session holds.
    async fn locks_held(connection: &mut PgConnection) -> i64 {
        sqlx::query_scalar(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
        )
        .fetch_one(connection)
        .await
        .unwrap()
    }

    #[sqlx::test]
    async fn a_claim_transaction_hands_its_connection_back_idle(pool: PgPool) {
        let kept = KeptConnections::new(pool.clone(), 1);
        for end in ["commit", "rollback"] {
            let mut tx = ClaimTransaction::begin(
                kept.take().await.unwrap(),
                "BEGIN; SELECT pg_advisory_xact_lock(7)",
            )
            .await
            .unwrap();
            assert_eq!(locks_held(&mut tx).await, 1, "{end}");
            let mut connection = match end {
                "commit" => tx.commit().await.unwrap(),
                _ => tx.rollback().await.unwrap(),
            };
            assert_eq!(locks_held(&mut connection).await, 0, "{end}");
            kept.keep(connection);
        }
    }

    #[sqlx::test]
    async fn a_claim_transaction_dropped_open_or_failing_to_begin_closes_its_connection(
        pool: PgPool,
    ) {
        // One connection: a connection given back in a transaction (or an aborted one)
        // would be the next one handed out.
        let one = PgPoolOptions::new()
            .max_connections(1)
            .connect_with((*pool.connect_options()).clone())
            .await
            .unwrap();
        let kept = KeptConnections::new(one.clone(), 1);

        let mut tx = ClaimTransaction::begin(
            kept.take().await.unwrap(),
            "BEGIN; SELECT pg_advisory_xact_lock(7)",
        )
        .await
        .unwrap();
        let dropped = backend_of(&mut tx).await;
        drop(tx);
        let mut next = one.acquire().await.unwrap();
        assert_ne!(backend_of(&mut next).await, dropped);
        assert_eq!(locks_held(&mut next).await, 0);
        drop(next);

        let failed = ClaimTransaction::begin(kept.take().await.unwrap(), "BEGIN; SELECT 1/0").await;
        assert!(failed.is_err());
        // An aborted transaction would refuse this (25P02).
        let answer: i32 = sqlx::query_scalar("SELECT 1")
            .fetch_one(&one)
            .await
            .unwrap();
        assert_eq!(answer, 1);
    }
}
