//! Signing in and out. The form posts are plain HTTP handlers (they work before the
//! page is hydrated, and answer with a redirect, as a form post should); the header asks
//! `current_admin` who is signed in.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;

/// The signed-in admin's email, or `None` for everyone else. Public: it tells a visitor
/// only that they are not signed in.
#[server(endpoint = "current_admin", input = GetUrl)]
pub async fn current_admin() -> Result<Option<String>, ServerFnError> {
    use axum::Extension;
    let admin = leptos_axum::extract::<Option<Extension<crate::domain::admins::Admin>>>().await?;
    Ok(admin.map(|Extension(admin)| admin.email))
}

/// Why the sign-in page is shown again, as the `error` query parameter says.
pub fn sign_in_problem(code: &str) -> Option<&'static str> {
    match code {
        "invalid" => Some("Wrong email or password."),
        "missing" => Some("Enter your email and your password."),
        "rate_limited" => Some("Too many sign-in attempts. Wait a minute, then try again."),
        "unavailable" => Some("StandMeet cannot check passwords right now. Try again shortly."),
        _ => None,
    }
}

#[cfg(feature = "ssr")]
pub use handlers::{require_admin, sign_in, sign_out};

#[cfg(feature = "ssr")]
mod handlers {
    use axum::extract::State;
    use axum::response::Redirect;
    use axum::{Extension, Form};
    use serde::Deserialize;
    use tower_sessions::Session;

    use crate::domain::admins;
    use crate::security::client::ClientAddress;
    use crate::security::guard::{SESSION_ADMIN_ID, SESSION_SIGNED_IN_AT, safe_next, unix_micros};
    use crate::state::AppState;

    #[derive(Debug, Deserialize)]
    pub struct SignInForm {
        #[serde(default)]
        email: String,
        #[serde(default)]
        password: String,
        #[serde(default)]
        next: Option<String>,
    }

    /// `POST /login`: on success a fresh session (a new id, so a session fixed by
    /// someone else before sign-in is worthless) and a redirect to `next`; otherwise
    /// back to the sign-in page with the reason. A wrong email and a wrong password get
    /// the same answer.
    pub async fn sign_in(
        State(state): State<AppState>,
        // Absent when the server was not started with connection info (some tests).
        client: Option<Extension<ClientAddress>>,
        session: Session,
        Form(form): Form<SignInForm>,
    ) -> Redirect {
        let next = safe_next(form.next.as_deref());
        let again = |error: &str| {
            let mut query = url::form_urlencoded::Serializer::new(String::new());
            query.append_pair("error", error);
            if !form.email.trim().is_empty() {
                query.append_pair("email", form.email.trim());
            }
            query.append_pair("next", &next);
            Redirect::to(&format!("/login?{}", query.finish()))
        };

        if form.email.trim().is_empty() || form.password.is_empty() {
            return again("missing");
        }
        let address = client.map(|Extension(ClientAddress(address))| address);
        // Only failures count: an address that failed too often this minute is refused;
        // an email many addresses failed against waits longer each time, but its
        // owner's right password still gets in.
        let mut admission = match state.sign_in_limiter.admit(address, &form.email).await {
            Ok(admission) => admission,
            Err(wait) => {
                tracing::warn!(
                    wait_secs = wait.as_secs(),
                    "sign-in refused: too many failures from this address"
                );
                return again("rate_limited");
            }
        };
        let checked = admins::authenticate(&state.pool, &form.email, &form.password).await;
        admission.checked();
        let admin = match checked {
            Ok(Some(admin)) => {
                admission.succeeded(&form.email);
                admin
            }
            Ok(None) => {
                admission.failed(&form.email);
                tracing::info!("a sign-in failed");
                return again("invalid");
            }
            Err(err) => {
                tracing::error!(
                    error = crate::causes::error_chain(err.as_ref()),
                    "sign-in could not be checked"
                );
                return again("unavailable");
            }
        };
        let stored = async {
            session.cycle_id().await?;
            session.insert(SESSION_ADMIN_ID, admin.id).await?;
            let now = unix_micros(time::OffsetDateTime::now_utc());
            session.insert(SESSION_SIGNED_IN_AT, now).await
        };
        if let Err(err) = stored.await {
            tracing::error!(error = %err, "cannot store the session");
            return again("unavailable");
        }
        tracing::info!(admin.id = admin.id, "an admin signed in");
        Redirect::to(&next)
    }

    /// The signed-in admin of this request, for admin server functions. The guard
    /// already answered 401 to anyone else; this is the second lock, and it hands the
    /// function the admin's identity for its log lines.
    pub async fn require_admin()
    -> Result<crate::domain::admins::Admin, leptos::prelude::ServerFnError> {
        use axum::Extension;
        match leptos_axum::extract::<Option<Extension<crate::domain::admins::Admin>>>().await {
            Ok(Some(Extension(admin))) => Ok(admin),
            _ => Err(leptos::prelude::ServerFnError::new(
                "Sign in as an admin to use this.",
            )),
        }
    }

    /// `POST /logout`: ends the session, back to the sign-in page.
    pub async fn sign_out(State(state): State<AppState>, session: Session) -> Redirect {
        // This session's live streams end now (in other processes, within seconds).
        if let Some(id) = session.id() {
            state.live.end_session(&id.to_string());
        }
        if let Err(err) = session.flush().await {
            tracing::error!(error = %err, "cannot delete the session");
        }
        Redirect::to("/login")
    }
}
