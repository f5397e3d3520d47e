//! The `corpus.vault_rebuild` job: a scan of the vault brought into its entries in one
//! transaction, with what changed recorded as `corpus.rebuilt`.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::super::index::queue_index_batches;
use super::super::{Status, Visibility};
use super::scan::{FailedNote, Scan, scan};
use crate::domain::events::{self, NewEvent};
use standmeet_jobs::{
    InsertOptions, Inserted, JobClient, JobContext, JobError, JobId, JobKind, JobState,
};

/// The rebuild's unique key: at most one waits.
pub const REBUILD_KEY: &str = "corpus.vault_rebuild";

/// What a rebuild did: its job's output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebuildOutput {
    pub added: u64,
    pub updated: u64,
    pub removed: u64,
    pub unchanged: u64,
    pub failed: Vec<FailedNote>,
    pub index_job_ids: Vec<JobId>,
    /// Entries whose note is gone but that were kept: more than half of the vault's
    /// (and more than [`REMOVALS_WITHOUT_ASKING`]) would have gone, which a rebuild
    /// does only when allowed.
    #[serde(default)]
    pub would_remove: u64,
}

/// Queues a rebuild, or finds the one waiting; records it as the newest. It removes
/// no more than half of the vault's entries (see [`RebuildArgs::allow_removals`]).
pub async fn queue_rebuild(
    pool: &PgPool,
    jobs: &JobClient,
) -> Result<Inserted, super::super::CorpusError> {
    queue_rebuild_with(pool, jobs, RebuildArgs::default()).await
}

/// [`queue_rebuild`] with `args`: one allowed to remove what it finds gone waits under
/// a key of its own, so that it is not taken for a waiting rebuild that is not.
pub async fn queue_rebuild_with(
    pool: &PgPool,
    jobs: &JobClient,
    args: RebuildArgs,
) -> Result<Inserted, super::super::CorpusError> {
    let key = if args.allow_removals {
        REBUILD_ALLOWING_REMOVALS_KEY
    } else {
        REBUILD_KEY
    };
    let mut tx = pool.begin().await?;
    let inserted = jobs
        .insert_unique_tx::<VaultRebuild>(&mut tx, &args, key, InsertOptions::default())
        .await?;
    sqlx::query!(
        r#"
        INSERT INTO corpus_vault_rebuilds (only_row, last_job_id) VALUES (true, $1)
        ON CONFLICT (only_row) DO UPDATE SET last_job_id = EXCLUDED.last_job_id, queued_at = now()
        "#,
        inserted.id.0
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(inserted)
}

/// The newest rebuild's job, if one was ever queued.
pub async fn last_rebuild(pool: &PgPool) -> Result<Option<JobId>, sqlx::Error> {
    Ok(
        sqlx::query_scalar!("SELECT last_job_id FROM corpus_vault_rebuilds")
            .fetch_optional(pool)
            .await?
            .flatten()
            .map(JobId),
    )
}

/// How a rebuild's refusal in words begins (a vault not there, or without a note): what
/// follows is for whoever asked, the MCP client too. Any other error of a rebuild is
/// ours (SQL, a path, a chain of causes): clients are told where to look, and the admin's
/// pages show it.
pub const NOT_REBUILT: &str = "The vault was not rebuilt: ";

/// The unique key of a waiting rebuild that may remove what it finds gone.
pub const REBUILD_ALLOWING_REMOVALS_KEY: &str = "corpus.vault_rebuild.allow_removals";

/// A rebuild that would remove more than this many entries (and more than half of the
/// vault's) removes none unless allowed: a note that is gone by the hundred is more
/// often a half-synced folder or a nested mount that is not there than the owner's
/// choice, and removed entries come back with new ids, breaking every link to them.
pub const REMOVALS_WITHOUT_ASKING: usize = 5;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RebuildArgs {
    /// Remove every entry whose note is gone, however many (`corpus.rebuild
    /// {allow_removals: true}`, or the confirm on the corpus page).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_removals: bool,
}

/// `corpus.vault_rebuild`: the corpus brought in line with the vault at `root`.
pub struct VaultRebuild {
    pub root: Option<PathBuf>,
}

impl JobKind for VaultRebuild {
    const KIND: &'static str = "corpus.vault_rebuild";
    const QUEUE: &'static str = "index";
    const MAX_ATTEMPTS: i16 = 3;
    const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
    /// A note saved while a rebuild runs must be read by another one: the running
    /// rebuild lets the next in (the advisory lock keeps them one after the other).
    const UNIQUE_WHILE_RUNNING: bool = false;
    type Args = RebuildArgs;
    type Output = RebuildOutput;

    async fn run(&self, job: JobContext, args: RebuildArgs) -> Result<RebuildOutput, JobError> {
        let Some(root) = self.root.clone() else {
            return Err(JobError::discard(
                "no vault is set (STANDMEET_VAULT) in the process that ran this rebuild",
            ));
        };
        // The page shows the newest rebuild, however it was queued (a schedule's too).
        // Written and committed on its own, before the rebuild's transaction: that
        // transaction lasts the whole scan, and a rebuild queued meanwhile
        // (`queue_rebuild`) locks this job's row and then this one; held here, the two
        // would wait on each other at this job's completion and PostgreSQL would end one.
        sqlx::query!(
            r#"
            INSERT INTO corpus_vault_rebuilds (only_row, last_job_id) VALUES (true, $1)
            ON CONFLICT (only_row) DO UPDATE
            SET last_job_id = greatest(corpus_vault_rebuilds.last_job_id, EXCLUDED.last_job_id)
            "#,
            job.id.0
        )
        .execute(job.pool())
        .await?;
        let mut tx = job.pool().begin().await?;
        // One rebuild at a time, across processes; the scan comes after the lock, so
        // the later rebuild reads what the earlier one did not.
        sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('corpus.vault_rebuild'))")
            .execute(&mut *tx)
            .await?;
        let found = tokio::task::spawn_blocking(move || scan(&root))
            .await
            .map_err(|err| JobError::retry(format!("the vault's scan stopped: {err}")))?
            // In words, at once: a vault that is not there or holds no note changes
            // nothing; the next change, click or night tries again.
            .map_err(|words| JobError::discard(format!("{NOT_REBUILT}{words}")))?;
        let output = apply(&mut tx, job.jobs(), found, args.allow_removals).await?;
        if output.added + output.updated + output.removed > 0 {
            let rebuilt =
                NewEvent::corpus_rebuilt(job.id.0, output.added, output.updated, output.removed);
            events::record(&mut tx, &rebuilt).await?;
        }
        job.complete_tx(&mut tx, &output).await?;
        tx.commit().await?;
        tracing::info!(
            added = output.added,
            updated = output.updated,
            removed = output.removed,
            unchanged = output.unchanged,
            failed = output.failed.len(),
            would_remove = output.would_remove,
            "the corpus was rebuilt from the vault"
        );
        if output.would_remove > 0 {
            tracing::warn!(
                would_remove = output.would_remove,
                "the rebuild kept entries whose notes are gone: more than half of the vault's would have been removed (a half-synced folder or a missing mount?); rebuild allowing removals to remove them"
            );
        }
        Ok(output)
    }
}

/// Brings the vault's entries in line with `found`, in the rebuild's transaction; what
/// is gone is removed only within [`removals_allowed`].
async fn apply(
    tx: &mut sqlx::PgConnection,
    jobs: &JobClient,
    found: Scan,
    allow_removals: bool,
) -> Result<RebuildOutput, JobError> {
    let known: HashMap<String, (i64, String)> =
        sqlx::query!("SELECT path, entry_id, content_hash FROM corpus_vault_notes")
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|row| (row.path, (row.entry_id, row.content_hash)))
            .collect();
    let keeps = |path: &str| found.keeps(path);
    let mut output = RebuildOutput {
        failed: found.failed.clone(),
        ..Default::default()
    };
    let mut to_index = Vec::new();
    for note in &found.notes {
        match known.get(&note.path) {
            Some((_, hash)) if *hash == note.hash => output.unchanged += 1,
            Some((entry_id, _)) => {
                sqlx::query!(
                    r#"
                    UPDATE corpus_entries
                    SET title = $2, body = $3, visibility = $4, status = $5,
                        version = version + 1, updated_at = now()
                    WHERE id = $1
                    "#,
                    entry_id,
                    note.title,
                    note.body,
                    note.visibility as Visibility,
                    note.status as Status,
                )
                .execute(&mut *tx)
                .await?;
                to_index.push(*entry_id);
                sqlx::query!(
                    r#"
                    UPDATE corpus_vault_notes
                    SET name = $2, aliases = $3, tags = $4, content_hash = $5, imported_at = now()
                    WHERE path = $1
                    "#,
                    note.path,
                    note.name,
                    &note.aliases,
                    &note.tags,
                    note.hash,
                )
                .execute(&mut *tx)
                .await?;
                output.updated += 1;
            }
            None => {
                let entry_id = sqlx::query_scalar!(
                    r#"
                    INSERT INTO corpus_entries (title, body, visibility, status)
                    VALUES ($1, $2, $3, $4) RETURNING id
                    "#,
                    note.title,
                    note.body,
                    note.visibility as Visibility,
                    note.status as Status,
                )
                .fetch_one(&mut *tx)
                .await?;
                to_index.push(entry_id);
                sqlx::query!(
                    r#"
                    INSERT INTO corpus_vault_notes (path, entry_id, name, aliases, tags, content_hash)
                    VALUES ($1, $2, $3, $4, $5, $6)
                    "#,
                    note.path,
                    entry_id,
                    note.name,
                    &note.aliases,
                    &note.tags,
                    note.hash,
                )
                .execute(&mut *tx)
                .await?;
                output.added += 1;
            }
        }
    }
    // Indexed in batches: one job per entry would cost a transaction each.
    output.index_job_ids = queue_index_batches(&mut *tx, jobs, &to_index).await?;
    let gone: Vec<i64> = known
        .iter()
        .filter(|(path, _)| !keeps(path))
        .map(|(_, (entry_id, _))| *entry_id)
        .collect();
    if !allow_removals && !removals_allowed(gone.len(), known.len()) {
        output.would_remove = gone.len() as u64;
    } else if !gone.is_empty() {
        output.removed = sqlx::query!("DELETE FROM corpus_entries WHERE id = ANY($1)", &gone)
            .execute(&mut *tx)
            .await?
            .rows_affected();
    }
    Ok(output)
}

/// Whether a rebuild may remove `gone` of the vault's `known` entries without being
/// allowed to: up to [`REMOVALS_WITHOUT_ASKING`], or up to half of them.
pub fn removals_allowed(gone: usize, known: usize) -> bool {
    gone <= REMOVALS_WITHOUT_ASKING || gone * 2 <= known
}

/// `corpus.rebuild`'s and `corpus.rebuild_result`'s answer: the counts once the rebuild
/// finished, else only its job and `pending`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RebuildAnswer {
    pub job_id: JobId,
    pub pending: bool,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub counts: Option<RebuildCounts>,
}

/// A finished rebuild's counts, as the tools answer them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RebuildCounts {
    pub added: u64,
    pub updated: u64,
    pub removed: u64,
    pub unchanged: u64,
    pub failed: Vec<FailedNote>,
    /// Entries whose note is gone, kept because removing them all would take more than
    /// half of the vault's (and more than five): `corpus.rebuild {allow_removals:
    /// true}` removes them. Answered only when there are any, so that the answer of an
    /// ordinary rebuild keeps its shape.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub would_remove: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// What rebuild `job_id` did, or that it is still pending.
pub async fn rebuild_result(
    jobs: &JobClient,
    job_id: JobId,
) -> Result<RebuildAnswer, super::super::CorpusError> {
    let row = jobs
        .get(job_id)
        .await?
        .filter(|row| row.kind == VaultRebuild::KIND)
        .ok_or(super::super::CorpusError::NotARebuild(job_id.0))?;
    if !row.state.is_terminal() {
        return Ok(RebuildAnswer {
            job_id,
            pending: true,
            counts: None,
        });
    }
    let output: Option<RebuildOutput> = row
        .output
        .clone()
        .and_then(|output| serde_json::from_value(output).ok());
    match output {
        Some(output) if row.state == JobState::Completed => Ok(RebuildAnswer {
            job_id,
            pending: false,
            counts: Some(RebuildCounts {
                added: output.added,
                updated: output.updated,
                removed: output.removed,
                unchanged: output.unchanged,
                failed: output.failed,
                would_remove: output.would_remove,
            }),
        }),
        _ => {
            let last_error = row
                .errors
                .as_array()
                .and_then(|errors| errors.last())
                .and_then(|last| last["error"].as_str())
                .unwrap_or_default()
                .to_string();
            let reason = match last_error.strip_prefix(NOT_REBUILT) {
                Some(words) => format!("{NOT_REBUILT}{words}"),
                None => format!(
                    "Its errors are on its page in the console (/admin/tasks/{}).",
                    job_id.0
                ),
            };
            Err(super::super::CorpusError::RebuildFailed {
                job_id: job_id.0,
                state: row.state.as_str(),
                reason,
                last_error,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebuild_removes_up_to_five_entries_or_up_to_half_without_asking() {
        assert!(removals_allowed(0, 0));
        assert!(removals_allowed(5, 5), "five, all of them");
        assert!(
            !removals_allowed(6, 10),
            "more than five and more than half"
        );
        assert!(removals_allowed(6, 12), "half");
        assert!(!removals_allowed(7, 12));
        assert!(removals_allowed(400, 10_000));
    }
}
