//! The owner's account: the owner's address, changing it (confirmed by a mailed link,
//! which anyone holding it may preview and apply), and the recovery phrase. The account
//! page and the confirmation page (`api::account`) answer these views.

use serde::{Deserialize, Serialize};

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

#[cfg(feature = "ssr")]
pub use operations::*;

#[cfg(feature = "ssr")]
mod operations {
    use crate::error::AppError;
    use crate::ops::Operator;

    use super::*;
    use crate::domain::owner;
    use crate::ops::when;
    use crate::state::AppState;

    /// The owner's address, the change waiting for its confirmation, and the last
    /// recovery-phrase send.
    pub async fn overview(state: &AppState, _by: Operator) -> Result<AccountView, AppError> {
        let current = owner::owner_email(&state.pool, &state.settings).await?;
        let pending = owner::pending_change(&state.pool).await?.map(|change| {
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
            .await?
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

    /// Asks to change the owner's address: a pending change, confirmed by a link mailed to
    /// the new address (a job). Answers what to tell the admin.
    pub async fn change(
        state: &AppState,
        by: Operator,
        new_email: String,
    ) -> Result<String, AppError> {
        // The address is the owner's: only a signed-in admin changes it, not an agent.
        let Some(admin_id) = by.admin_id() else {
            return Err(AppError::Unauthorized(
                "Sign in as an admin to change the owner's address.".into(),
            ));
        };
        let job = owner::request_change(
            &state.pool,
            &state.jobs,
            &state.settings,
            &state.mailer,
            &new_email,
            admin_id,
        )
        .await?;
        tracing::info!(
            job.id = job.0,
            ?by,
            "the owner asked to change their address"
        );
        Ok(format!(
            "Confirmation mail to {} queued: the change takes effect once its link is opened.",
            new_email.trim()
        ))
    }

    /// Cancels the pending change; its link no longer works.
    pub async fn cancel(state: &AppState, _by: Operator, id: i64) -> Result<String, AppError> {
        owner::cancel_change(&state.pool, id).await?;
        Ok("The change was cancelled; its link no longer works.".into())
    }

    /// Sends a recovery phrase now (synchronously, by decision); answers whether it went.
    pub async fn recovery(state: &AppState, _by: Operator) -> Result<RecoveryView, AppError> {
        let attempt =
            owner::send_recovery_phrase(&state.pool, &state.settings, &state.mailer).await?;
        Ok(RecoveryView {
            recipient: attempt.recipient,
            at: when(attempt.attempted_at),
            sent: attempt.sent,
            error: attempt.error,
        })
    }

    /// What the confirmation link `token` would do: the new address. Nothing changes.
    pub async fn preview(state: &AppState, token: String) -> Result<String, AppError> {
        owner::preview(&state.pool, &token)
            .await?
            .map_err(AppError::from)
    }

    /// Applies the change the confirmation link `token` names; answers the new address.
    pub async fn confirm(state: &AppState, token: String) -> Result<String, AppError> {
        owner::confirm(&state.pool, &token)
            .await?
            .map_err(AppError::from)
    }
}
