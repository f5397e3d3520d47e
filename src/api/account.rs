//! The owner's account page: the owner's address, changing it (confirmed by mail), and
//! the recovery phrase; and the public confirmation link.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;
use serde::{Deserialize, Serialize};

use crate::api::FormError;
use crate::model::{JobState, MailState};

/// A change waiting for its confirmation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingView {
    pub id: i64,
    pub new_email: String,
    pub requested: String,
    pub job_id: Option<i64>,
    pub job_state: Option<JobState>,
    pub mail_state: MailState,
    pub note: Option<String>,
}

/// The last recovery-phrase send.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryView {
    pub recipient: String,
    pub at: String,
    pub sent: bool,
    pub error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountView {
    pub current_email: Option<String>,
    pub pending: Option<PendingView>,
    pub recovery: Option<RecoveryView>,
}

#[server(endpoint = "account/overview", input = GetUrl)]
pub async fn account_overview() -> Result<AccountView, ServerFnError> {
    server::overview().await
}

/// Asks to change the owner's address; answers what to tell the admin.
#[server(endpoint = "account/change_email")]
pub async fn change_owner_email(new_email: String) -> Result<String, ServerFnError> {
    server::change(new_email).await
}

#[server(endpoint = "account/cancel_change")]
pub async fn cancel_email_change(id: i64) -> Result<String, ServerFnError> {
    server::cancel(id).await
}

/// Sends a recovery phrase now; answers what happened.
#[server(endpoint = "account/send_recovery")]
pub async fn send_recovery_phrase() -> Result<RecoveryView, ServerFnError> {
    server::recovery().await
}

/// What the link from the confirmation mail would do: the new address (nothing changes).
#[server(endpoint = "confirm_email/preview", input = GetUrl)]
pub async fn confirm_email_preview(token: String) -> Result<String, FormError> {
    server::preview(token).await
}

/// Applies the change the link from the confirmation mail names (the page's "Confirm"
/// button); answers the new address.
#[server(endpoint = "confirm_email")]
pub async fn confirm_email(token: String) -> Result<String, FormError> {
    server::confirm(token).await
}

#[cfg(feature = "ssr")]
mod server {
    use leptos::prelude::*;

    use super::*;
    use crate::api::auth::require_admin;
    use crate::api::replies::{form_reply, reply};
    use crate::api::when;
    use crate::domain::owner;
    use crate::state::AppState;

    pub async fn overview() -> Result<AccountView, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let current = owner::owner_email(&state.pool, &state.settings)
            .await
            .map_err(reply)?;
        let pending = owner::pending_change(&state.pool)
            .await
            .map_err(reply)?
            .map(|change| {
                let mail_state = change
                    .job_state
                    .map(MailState::of_job)
                    .unwrap_or(MailState::Sending);
                PendingView {
                    id: change.id,
                    new_email: change.new_email,
                    requested: when(change.created_at),
                    job_id: change.job_id,
                    job_state: change.job_state,
                    mail_state,
                    note: change.job_error.map(|error| format!("Last error: {error}")),
                }
            });
        let recovery = owner::last_recovery(&state.pool)
            .await
            .map_err(reply)?
            .map(|attempt| RecoveryView {
                recipient: attempt.recipient,
                at: when(attempt.attempted_at),
                sent: attempt.sent,
                error: attempt.error,
            });
        Ok(AccountView {
            current_email: current.map(|email| email.to_string()),
            pending,
            recovery,
        })
    }

    pub async fn change(new_email: String) -> Result<String, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let job = owner::request_change(
            &state.pool,
            &state.jobs,
            &state.settings,
            &state.mailer,
            &new_email,
            admin.id,
        )
        .await
        .map_err(reply)?;
        tracing::info!(
            job.id = job.0,
            admin.id = admin.id,
            "the owner asked to change their address"
        );
        Ok(format!(
            "Confirmation mail to {} queued: the change takes effect once its link is opened.",
            new_email.trim()
        ))
    }

    pub async fn cancel(id: i64) -> Result<String, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        owner::cancel_change(&state.pool, id).await.map_err(reply)?;
        Ok("The change was cancelled; its link no longer works.".into())
    }

    pub async fn recovery() -> Result<RecoveryView, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let attempt = owner::send_recovery_phrase(&state.pool, &state.settings, &state.mailer)
            .await
            .map_err(reply)?;
        Ok(RecoveryView {
            recipient: attempt.recipient,
            at: when(attempt.attempted_at),
            sent: attempt.sent,
            error: attempt.error,
        })
    }

    pub async fn preview(token: String) -> Result<String, FormError> {
        let state = expect_context::<AppState>();
        owner::preview(&state.pool, &token)
            .await
            .map_err(form_reply)?
            .map_err(form_reply)
    }

    pub async fn confirm(token: String) -> Result<String, FormError> {
        let state = expect_context::<AppState>();
        owner::confirm(&state.pool, &token)
            .await
            .map_err(form_reply)?
            .map_err(form_reply)
    }
}
