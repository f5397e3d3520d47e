//! Sessions as other parts of StandMeet need to know them: which are still alive (the
//! live streams end with their session).

use sqlx::PgPool;

/// Which of these sessions (tower-sessions ids) still exist and have not expired.
pub async fn sessions_alive(pool: &PgPool, ids: &[String]) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT id FROM sessions WHERE id = ANY($1) AND expiry_date > now()",
        ids
    )
    .fetch_all(pool)
    .await
}
