//! The vault on `/admin/corpus`: "Rebuild from vault", and the newest rebuild with its
//! job's state, its counts and its post-build hooks' deliveries. The corpus page
//! (`api::vault`) and the tools `corpus.rebuild` and `corpus.rebuild_result` answer
//! these views.

use serde::{Deserialize, Serialize};

use crate::model::JobState;

/// The vault's part of the page; `None` from [`vault_status`] when no vault is set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VaultView {
    pub last: Option<RebuildView>,
}

/// The newest rebuild.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RebuildView {
    pub job_id: i64,
    pub state: JobState,
    /// Once it completed.
    pub counts: Option<RebuildCountsView>,
    /// Why it did not complete, when it ended otherwise.
    pub error: Option<String>,
    /// Its `corpus.rebuilt` event's deliveries: the post-build hooks.
    pub hooks: Vec<HookView>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebuildCountsView {
    pub added: u64,
    pub updated: u64,
    pub removed: u64,
    pub unchanged: u64,
    /// (path, why) of each note that was not imported.
    pub failed: Vec<(String, String)>,
    /// Entries whose note is gone, kept: removing them would take more than half of
    /// the vault's. The page asks before a rebuild that removes them.
    pub would_remove: u64,
}

/// One post-build hook's delivery.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookView {
    pub delivery_id: i64,
    pub endpoint_id: i64,
    pub url: String,
    /// sending, delivered or failed.
    pub state: String,
    /// Its job while it has not finished (the chip follows it).
    pub pending_job_id: Option<i64>,
}

#[cfg(feature = "ssr")]
pub use operations::*;

#[cfg(feature = "ssr")]
mod operations {
    use crate::error::AppError;
    use crate::ops::{Done, Operator};

    use super::*;
    use crate::domain::corpus::{CorpusError, vault};
    use crate::domain::events::EventType;
    use crate::domain::waiting;
    use crate::domain::webhooks;
    use crate::state::AppState;

    /// A rebuild's answer, as the tools give it.
    pub use crate::domain::corpus::vault::RebuildAnswer;

    /// The vault panel: the newest rebuild, its counts and its hooks' deliveries; `None`
    /// without a vault.
    pub async fn status(state: &AppState, _by: Operator) -> Result<Option<VaultView>, AppError> {
        if state.settings.vault.is_none() {
            return Ok(None);
        }
        let Some(job_id) = vault::last_rebuild(&state.pool).await? else {
            return Ok(Some(VaultView { last: None }));
        };
        let Some(job) = state.jobs.get(job_id).await? else {
            // Cleaned away with its retention: nothing left to show.
            return Ok(Some(VaultView { last: None }));
        };
        let (counts, error) = match vault::rebuild_result(&state.jobs, job_id).await {
            Ok(answer) => (
                answer.counts.map(|counts| RebuildCountsView {
                    added: counts.added,
                    updated: counts.updated,
                    removed: counts.removed,
                    unchanged: counts.unchanged,
                    failed: counts
                        .failed
                        .into_iter()
                        .map(|failed| (failed.path, failed.error))
                        .collect(),
                    would_remove: counts.would_remove,
                }),
                None,
            ),
            // The admin sees the job's own last error, which the tools do not answer.
            Err(CorpusError::RebuildFailed {
                job_id,
                state,
                last_error,
                ..
            }) => (
                None,
                Some(format!(
                    "The rebuild (job {job_id}) did not finish: it is {state}. Its last error: {last_error}"
                )),
            ),
            Err(err) => return Err(AppError::from(err)),
        };
        let hooks = webhooks::deliveries_of(&state.pool, EventType::CorpusRebuilt, job_id.0)
            .await?
            .into_iter()
            .map(|(delivery, url)| HookView {
                delivery_id: delivery.id,
                endpoint_id: delivery.endpoint_id,
                url,
                state: delivery.state.as_str().to_string(),
                pending_job_id: delivery
                    .job_id
                    .filter(|_| delivery.state == webhooks::DeliveryState::Sending),
            })
            .collect();
        Ok(Some(VaultView {
            last: Some(RebuildView {
                job_id: job_id.0,
                state: job.state,
                counts,
                error,
                hooks,
            }),
        }))
    }

    /// How long an agent's `corpus.rebuild` waits before it answers a receipt.
    const AGENT_REBUILD_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

    /// "Rebuild from vault": queues a rebuild, or finds the one waiting. The console
    /// answers at once (its panel follows the job live); an agent waits up to 20 s and
    /// is told the counts, or `pending: true` (then `corpus.rebuild_result`). With
    /// `allow_removals`, it removes every entry whose note is gone, however many.
    pub async fn rebuild(
        state: &AppState,
        by: Operator,
        allow_removals: bool,
    ) -> Result<Done<vault::RebuildAnswer>, AppError> {
        if state.settings.vault.is_none() {
            return Err(AppError::from(CorpusError::NoVault));
        }
        let inserted = vault::queue_rebuild_with(
            &state.pool,
            &state.jobs,
            vault::RebuildArgs { allow_removals },
        )
        .await?;
        tracing::info!(job.id = %inserted.id, duplicate = inserted.duplicate, ?by, allow_removals, "a vault rebuild was asked for");
        let message = if inserted.duplicate {
            format!("Rebuild already queued (job {}).", inserted.id)
        } else {
            format!("Rebuild queued (job {}).", inserted.id)
        };
        if by == Operator::Agent {
            waiting::wait(&state.jobs, &[inserted.id], AGENT_REBUILD_WAIT).await?;
        }
        Ok(Done {
            view: vault::rebuild_result(&state.jobs, inserted.id).await?,
            message,
        })
    }

    /// What rebuild `job_id` did, in `corpus.rebuild`'s shape, or that it still runs.
    pub async fn rebuild_result(
        state: &AppState,
        _by: Operator,
        job_id: i64,
    ) -> Result<vault::RebuildAnswer, AppError> {
        Ok(vault::rebuild_result(&state.jobs, standmeet_jobs::JobId(job_id)).await?)
    }
}
