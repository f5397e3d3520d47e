//! Who may reach what. One middleware in front of every route decides by path, so a new
//! admin page or server function is protected the day it is added:
//!
//! - `/admin` and `/admin/*` pages: a signed-in admin, else a redirect to
//!   `/login?next=<where they were going>`.
//! - `/api/*` server functions: a signed-in admin, else 401, unless the function is in
//!   [`PUBLIC_SERVER_FUNCTIONS`] (deny by default: forgetting to list a public
//!   function breaks it loudly, forgetting to protect an admin one cannot happen).
//! - everything else is public.
//!
//! The signed-in admin is put in the request's extensions as [`Admin`], where server
//! functions and pages find it.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use sqlx::PgPool;
use tower_sessions::Session;

use crate::domain::admins::{self, Admin};

/// Server functions anyone may call. Everything else under `/api/` is for admins.
pub const PUBLIC_SERVER_FUNCTIONS: &[&str] = &[
    "/api/front_page",
    "/api/current_admin",
    "/api/request_access",
    "/api/redeem_access",
    "/api/access/granted",
    "/api/confirm_email",
    "/api/confirm_email/preview",
    "/api/search",
    "/api/entry",
    "/api/book/page",
    "/api/book",
    "/api/book/cancel_view",
    "/api/book/cancel",
];

/// The session key that holds the signed-in admin's id.
pub const SESSION_ADMIN_ID: &str = "admin_id";

/// The session key that holds when the admin signed in (Unix microseconds): a session
/// from before the admin's last password change is over.
pub const SESSION_SIGNED_IN_AT: &str = "signed_in_at";

/// An admin's session ends after this long without a request.
pub const SESSION_IDLE_TIMEOUT: tower_sessions::cookie::time::Duration =
    tower_sessions::cookie::time::Duration::hours(8);

/// How often a used session's expiry is pushed back to [`SESSION_IDLE_TIMEOUT`] from
/// now: not on every request (each push is a write), but often enough that a session in
/// use never runs out.
const SESSION_SLIDE_EVERY: tower_sessions::cookie::time::Duration =
    tower_sessions::cookie::time::Duration::minutes(5);

/// Unix microseconds, as [`SESSION_SIGNED_IN_AT`] holds them.
pub fn unix_micros(at: time::OffsetDateTime) -> i64 {
    (at.unix_timestamp_nanos() / 1_000) as i64
}

/// The session key that says a visitor redeemed an access code (it holds their email);
/// restricted corpus entries are shown to such a session.
pub const SESSION_ACCESS_GRANTED: &str = "access_granted";

/// The session key that holds the booking a visitor just made with a plain form post,
/// until `/book` has shown it once.
pub const SESSION_JUST_BOOKED: &str = "just_booked";

/// Which protection a path falls under.
#[derive(Debug, PartialEq, Eq)]
pub enum Area {
    AdminPage,
    AdminServerFunction,
    Public,
}

pub fn area_of(path: &str) -> Area {
    if path == "/admin" || path.starts_with("/admin/") {
        Area::AdminPage
    } else if path.starts_with("/api/") && !PUBLIC_SERVER_FUNCTIONS.contains(&path) {
        Area::AdminServerFunction
    } else {
        Area::Public
    }
}

pub async fn require_admin_where_needed(
    State(pool): State<PgPool>,
    session: Session,
    mut request: Request,
    next: Next,
) -> Response {
    let area = area_of(request.uri().path());
    let admin = match signed_in_admin(&pool, &session).await {
        Ok(admin) => admin,
        Err(err) if area != Area::Public => {
            tracing::error!(
                error = crate::causes::error_chain(err.as_ref()),
                "cannot check the session"
            );
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "StandMeet cannot check your sign-in right now; try again shortly.",
            )
                .into_response();
        }
        Err(_) => None,
    };
    match (&admin, area) {
        (None, Area::AdminPage) => {
            let target = request
                .uri()
                .path_and_query()
                .map(|pq| pq.as_str().to_string())
                .unwrap_or_else(|| "/admin".to_string());
            Redirect::to(&login_url(&target)).into_response()
        }
        (None, Area::AdminServerFunction) => {
            (StatusCode::UNAUTHORIZED, "Sign in as an admin to use this.").into_response()
        }
        _ => {
            if let Some(admin) = admin {
                request.extensions_mut().insert(admin);
            }
            next.run(request).await
        }
    }
}

/// The admin this session belongs to, if it belongs to one that still exists and the
/// session was signed in after the admin's last password change (else the session is
/// ended). A session in use has its idle expiry pushed back (see
/// [`SESSION_SLIDE_EVERY`]).
async fn signed_in_admin(pool: &PgPool, session: &Session) -> anyhow::Result<Option<Admin>> {
    let Some(id) = session.get::<i64>(SESSION_ADMIN_ID).await? else {
        return Ok(None);
    };
    let session_id = session.id().map(|id| id.to_string()).unwrap_or_default();
    let Some(found) = admins::admin_for_session(pool, id, &session_id).await? else {
        return Ok(None);
    };
    if let Some(valid_after) = found.sessions_valid_after {
        let signed_in_at = session.get::<i64>(SESSION_SIGNED_IN_AT).await?.unwrap_or(0);
        if signed_in_at < unix_micros(valid_after) {
            tracing::info!(
                admin.id = id,
                "a session from before a password change ended"
            );
            session.flush().await?;
            return Ok(None);
        }
    }
    let now = time::OffsetDateTime::now_utc();
    let slide_due = found
        .session_expires
        .is_none_or(|expires| expires < now + SESSION_IDLE_TIMEOUT - SESSION_SLIDE_EVERY);
    if slide_due {
        // Marks the session changed: it is saved with a fresh expiry (and cookie).
        session.set_expiry(Some(tower_sessions::Expiry::OnInactivity(
            SESSION_IDLE_TIMEOUT,
        )));
    }
    Ok(Some(found.admin))
}

/// `/login?next=<target>`, with the target encoded.
pub fn login_url(target: &str) -> String {
    let encoded: String = url::form_urlencoded::byte_serialize(target.as_bytes()).collect();
    format!("/login?next={encoded}")
}

/// Where to go after signing in: `next` when it is a path on this site, else the
/// overview. Refuses anything a browser could read as another site
/// (`//evil.example`, `/\evil.example`, `https://…`) and control characters.
pub fn safe_next(next: Option<&str>) -> String {
    const DEFAULT: &str = "/admin";
    let Some(next) = next.map(str::trim).filter(|next| !next.is_empty()) else {
        return DEFAULT.to_string();
    };
    let on_this_site = next.starts_with('/')
        && !next.starts_with("//")
        && !next.starts_with("/\\")
        && !next.chars().any(|c| c.is_control() || c == '\\');
    if on_this_site {
        next.to_string()
    } else {
        DEFAULT.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_fall_into_areas() {
        assert_eq!(area_of("/admin"), Area::AdminPage);
        assert_eq!(area_of("/admin/tasks"), Area::AdminPage);
        assert_eq!(area_of("/administrator"), Area::Public);
        assert_eq!(area_of("/api/front_page"), Area::Public);
        assert_eq!(area_of("/api/approve_request"), Area::AdminServerFunction);
        assert_eq!(area_of("/api/anything_new"), Area::AdminServerFunction);
        assert_eq!(area_of("/"), Area::Public);
        assert_eq!(area_of("/login"), Area::Public);
    }

    #[test]
    fn next_must_stay_on_this_site() {
        assert_eq!(safe_next(Some("/admin/mail?page=2")), "/admin/mail?page=2");
        assert_eq!(safe_next(None), "/admin");
        assert_eq!(safe_next(Some("")), "/admin");
        assert_eq!(safe_next(Some("https://evil.example/")), "/admin");
        assert_eq!(safe_next(Some("//evil.example/")), "/admin");
        assert_eq!(safe_next(Some("/\\evil.example")), "/admin");
        assert_eq!(safe_next(Some("/ok\r\nSet-Cookie: x")), "/admin");
        assert_eq!(safe_next(Some("javascript:alert(1)")), "/admin");
    }

    #[test]
    fn the_login_url_carries_the_target_encoded() {
        assert_eq!(
            login_url("/admin/tasks?state=running&kind=a b"),
            "/login?next=%2Fadmin%2Ftasks%3Fstate%3Drunning%26kind%3Da+b"
        );
    }
}
