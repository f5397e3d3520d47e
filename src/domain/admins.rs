//! Admin accounts: who may sign in, their password hashes, and the admin made at start.
//!
//! Passwords are hashed with argon2id (the `password-auth` crate's defaults). Hashing
//! is deliberately slow (tens of milliseconds of CPU), so it runs on the blocking pool,
//! never on the async runtime's threads.

use std::sync::LazyLock;

use anyhow::Context;
use sqlx::PgPool;

use crate::config::{AdminBootstrap, Settings};
use crate::types::EmailAddress;

/// A signed-in admin, as the request guard finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admin {
    pub id: i64,
    pub email: String,
}

/// What the request guard learns about a session's admin in one query.
#[derive(Clone, Debug)]
pub struct SessionAdmin {
    pub admin: Admin,
    /// Sessions signed in before this are over (the password changed since).
    pub sessions_valid_after: Option<time::OffsetDateTime>,
    /// When the session (by its id) expires, as stored.
    pub session_expires: Option<time::OffsetDateTime>,
}

/// The address of the admin StandMeet creates when no admin is configured.
pub const DEFAULT_ADMIN_EMAIL: &str = "admin@localhost";

/// A hash to verify against when the email is unknown, so that a wrong email and a
/// wrong password take the same time (and an attacker cannot tell them apart).
static DECOY_HASH: LazyLock<String> =
    LazyLock::new(|| password_auth::generate_hash("decoy password, never anyone's"));

/// Hashes `password` on the blocking pool.
pub async fn hash_password(password: String) -> anyhow::Result<String> {
    tokio::task::spawn_blocking(move || password_auth::generate_hash(password))
        .await
        .context("the password hashing task failed")
}

/// Checks `password` against `hash` on the blocking pool.
async fn password_matches(password: String, hash: String) -> bool {
    tokio::task::spawn_blocking(move || password_auth::verify_password(password, &hash).is_ok())
        .await
        .unwrap_or(false)
}

/// The admin with this email and password, or `None` when either is wrong. Both
/// cases cost one password verification.
#[tracing::instrument(skip_all)]
pub async fn authenticate(
    pool: &PgPool,
    email: &str,
    password: &str,
) -> anyhow::Result<Option<Admin>> {
    let found = match EmailAddress::parse(email) {
        Ok(email) => sqlx::query!(
            r#"SELECT id, email, password_hash FROM admins WHERE lower(email) = lower($1)"#,
            email.as_str()
        )
        .fetch_optional(pool)
        .await
        .context("cannot look up the admin")?,
        Err(_) => None,
    };
    let Some(row) = found else {
        password_matches(password.to_string(), DECOY_HASH.clone()).await;
        return Ok(None);
    };
    if !password_matches(password.to_string(), row.password_hash).await {
        return Ok(None);
    }
    sqlx::query!(
        "UPDATE admins SET last_signed_in_at = now() WHERE id = $1",
        row.id
    )
    .execute(pool)
    .await
    .context("cannot record the sign-in")?;
    Ok(Some(Admin {
        id: row.id,
        email: row.email,
    }))
}

/// The admin with this id, if there still is one, with what the guard needs to know
/// about session `session_id`.
pub async fn admin_for_session(
    pool: &PgPool,
    id: i64,
    session_id: &str,
) -> Result<Option<SessionAdmin>, sqlx::Error> {
    let row = sqlx::query!(
        r#"
        SELECT a.id, a.email, a.sessions_valid_after,
               (SELECT s.expiry_date FROM sessions s WHERE s.id = $2) AS session_expires
        FROM admins a WHERE a.id = $1
        "#,
        id,
        session_id,
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|row| SessionAdmin {
        admin: Admin {
            id: row.id,
            email: row.email,
        },
        sessions_valid_after: row.sessions_valid_after,
        session_expires: row.session_expires,
    }))
}

/// Sets the password of admin `email` and ends every session of that admin. Answers
/// whether there is such an admin.
pub async fn set_password(
    pool: &PgPool,
    email: &EmailAddress,
    password: &str,
) -> anyhow::Result<bool> {
    let hash = hash_password(password.to_string()).await?;
    let changed = sqlx::query!(
        r#"
        UPDATE admins
        SET password_hash = $2, sessions_valid_after = now(), updated_at = now()
        WHERE lower(email) = lower($1)
        "#,
        email.as_str(),
        hash
    )
    .execute(pool)
    .await
    .context("cannot set the password")?;
    Ok(changed.rows_affected() == 1)
}

/// Creates admin `email` with `password`; answers `false`, changing nothing, when there
/// is one already.
pub async fn create(pool: &PgPool, email: &EmailAddress, password: &str) -> anyhow::Result<bool> {
    let hash = hash_password(password.to_string()).await?;
    let created = sqlx::query_scalar!(
        r#"
        INSERT INTO admins (email, password_hash) VALUES ($1, $2)
        ON CONFLICT ((lower(email))) DO NOTHING
        RETURNING id
        "#,
        email.as_str(),
        hash
    )
    .fetch_optional(pool)
    .await
    .context("cannot create the admin")?;
    Ok(created.is_some())
}

/// Creates the admin `email`, or sets its password when it exists and the password is
/// a different one (which ends that admin's sessions, and is said in the log: a
/// password changed elsewhere does not last while the setting gives another; the same
/// password, given again at every start, changes nothing). Answers its id.
pub async fn admin_upsert(
    pool: &PgPool,
    email: &EmailAddress,
    password: &str,
) -> anyhow::Result<i64> {
    let existing = sqlx::query!(
        "SELECT id, password_hash FROM admins WHERE lower(email) = lower($1)",
        email.as_str()
    )
    .fetch_optional(pool)
    .await
    .context("cannot look up the admin")?;
    if let Some(existing) = existing {
        if !password_matches(password.to_string(), existing.password_hash).await {
            set_password(pool, email, password).await?;
            tracing::warn!(
                %email,
                "STANDMEET_ADMIN_PASSWORD replaced this admin's password, which was a different one (changed by `standmeet admin set-password`, or the setting changed) and ended its sessions; while the setting is set it wins at every start: remove it to keep a password changed elsewhere"
            );
        }
        return Ok(existing.id);
    }
    let hash = hash_password(password.to_string()).await?;
    let id = sqlx::query_scalar!(
        r#"
        INSERT INTO admins (email, password_hash) VALUES ($1, $2)
        ON CONFLICT ((lower(email)))
        DO UPDATE SET password_hash = EXCLUDED.password_hash, updated_at = now(),
                      sessions_valid_after = now()
        RETURNING id
        "#,
        email.as_str(),
        hash
    )
    .fetch_one(pool)
    .await
    .context("cannot create or update the admin")?;
    Ok(id)
}

/// An admin made at start with a generated password, to be shown to the operator once.
pub struct GeneratedAdmin {
    pub email: String,
    pub password: String,
}

/// Makes sure someone can sign in:
/// - with `STANDMEET_ADMIN_EMAIL` and `STANDMEET_ADMIN_PASSWORD`, that admin is created
///   or its password set;
/// - otherwise, while there is no admin at all, the first one is created
///   (`STANDMEET_ADMIN_EMAIL`, else `admin@localhost`) with a generated password, which
///   is returned so the caller can show it once. Only when `can_show_password` (the
///   caller has somewhere to show it that is not a log); without, an empty table is
///   left empty and the log says how to create an admin.
///
/// Several copies starting at once create at most one admin: the insert only happens
/// while the table is empty, and the unique email index settles a tie.
pub async fn bootstrap(
    pool: &PgPool,
    settings: &Settings,
    can_show_password: bool,
) -> anyhow::Result<Option<GeneratedAdmin>> {
    let first_email = match &settings.admin {
        Some(AdminBootstrap {
            email,
            password: Some(password),
        }) => {
            admin_upsert(pool, email, password).await?;
            tracing::info!(%email, "the admin from STANDMEET_ADMIN_EMAIL is ready");
            return Ok(None);
        }
        Some(AdminBootstrap {
            email,
            password: None,
        }) => email.as_str(),
        None => DEFAULT_ADMIN_EMAIL,
    };

    let any_admin = sqlx::query_scalar!(r#"SELECT EXISTS (SELECT FROM admins) AS "exists!""#)
        .fetch_one(pool)
        .await
        .context("cannot count the admins")?;
    if any_admin {
        return Ok(None);
    }
    if !can_show_password {
        tracing::warn!(
            "no admin can sign in yet, and standard output is not a terminal, so no password is made up (it would be kept wherever the output goes): create the admin with `standmeet admin create {first_email}` (it asks for the password), or set STANDMEET_ADMIN_EMAIL and STANDMEET_ADMIN_PASSWORD"
        );
        return Ok(None);
    }
    let password = generate_password();
    let hash = hash_password(password.clone()).await?;
    let created = sqlx::query_scalar!(
        r#"
        INSERT INTO admins (email, password_hash)
        SELECT $1, $2 WHERE NOT EXISTS (SELECT FROM admins)
        ON CONFLICT DO NOTHING
        RETURNING id
        "#,
        first_email,
        hash
    )
    .fetch_optional(pool)
    .await
    .context("cannot create the first admin")?;
    Ok(created.map(|_| GeneratedAdmin {
        email: first_email.to_string(),
        password,
    }))
}

/// 20 characters from an alphabet without look-alikes (no 0/O, 1/l/I): about 115 bits.
pub fn generate_password() -> String {
    use rand::seq::IndexedRandom;
    const ALPHABET: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::rng();
    (0..20)
        .map(|_| *ALPHABET.choose(&mut rng).expect("a non-empty alphabet") as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_passwords_are_long_and_differ() {
        let a = generate_password();
        let b = generate_password();
        assert_eq!(a.len(), 20);
        assert_ne!(a, b);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_alphanumeric() && !"0O1lI".contains(c))
        );
    }
}
