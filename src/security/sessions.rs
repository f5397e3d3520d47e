//! Sessions as other parts of StandMeet need to know them: which still sign their admin
//! in (the live streams end with their session).

use sqlx::PgPool;

/// A session as the admin guard let it in: its id (tower-sessions), its admin, and when
/// it signed in (Unix microseconds, `guard::SESSION_SIGNED_IN_AT`).
pub struct SignedIn<'a> {
    pub session: &'a str,
    pub admin: i64,
    pub signed_in_at: i64,
}

/// Which of these sessions still sign their admin in: the session exists and has not
/// expired, its admin still exists, and it signed in after the admin's last password
/// change (what the admin guard asks of every request; `guard::signed_in_admin`).
pub async fn sessions_still_signed_in(
    pool: &PgPool,
    sessions: &[SignedIn<'_>],
) -> Result<Vec<String>, sqlx::Error> {
    let admins: Vec<i64> = sessions.iter().map(|s| s.admin).collect();
    let signed_in: Vec<i64> = sessions.iter().map(|s| s.signed_in_at).collect();
    let sessions: Vec<String> = sessions.iter().map(|s| s.session.to_string()).collect();
    sqlx::query_scalar!(
        r#"
        SELECT f.session AS "session!"
        FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS f(session, admin, signed_in_at)
        JOIN sessions s ON s.id = f.session AND s.expiry_date > now()
        JOIN admins a ON a.id = f.admin
        WHERE a.sessions_valid_after IS NULL
           OR f.signed_in_at >= (extract(epoch FROM a.sessions_valid_after) * 1000000)::bigint
        "#,
        &sessions,
        &admins,
        &signed_in,
    )
    .fetch_all(pool)
    .await
}
