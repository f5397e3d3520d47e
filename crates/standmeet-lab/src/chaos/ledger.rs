//! What became of a scenario's jobs, read once at its end: how many are still there,
//! how many ended in each state, and, for jobs with an effect outside their
//! completion (`chaos.effect`) or that say which attempt completed them, whether each
//! effect happened once and each completion is its last attempt's. The scenarios that
//! promise "nothing lost, each job finished once" check it the same way through this.

use sqlx::PgPool;

use super::Outcome;

/// The ledger of one set of jobs ([`Ledger::read`]).
#[derive(Clone, Copy, Debug, Default, sqlx::FromRow)]
pub(crate) struct Ledger {
    /// Jobs of the set that are still in `jobs`.
    pub(crate) present: i64,
    pub(crate) completed: i64,
    pub(crate) discarded: i64,
    pub(crate) cancelled: i64,
    /// `chaos.effect` jobs that left no effect.
    pub(crate) missing_effects: i64,
    /// `chaos.effect` jobs that left more than one (at-least-once: allowed where a
    /// worker died between its effect and its completion).
    pub(crate) doubled_effects: i64,
    /// The effects of the set's `chaos.effect` jobs, all told.
    pub(crate) effects: i64,
    /// Completed `system.flaky` and `chaos.effect` jobs whose output names another
    /// attempt than the job's last: a late completion that was not fenced off.
    pub(crate) stale_completions: i64,
}

impl Ledger {
    /// Reads the ledger of the jobs `ids` in one statement (effects only where the
    /// scenario made `chaos_effects`, which a first one asks).
    pub(crate) async fn read(pool: &PgPool, ids: &[i64]) -> Result<Ledger, sqlx::Error> {
        let has_effects: bool =
            sqlx::query_scalar("SELECT to_regclass('chaos_effects') IS NOT NULL")
                .fetch_one(pool)
                .await?;
        let effects_of_job = if has_effects {
            "(SELECT count(*) FROM chaos_effects e WHERE e.job_id = j.id)"
        } else {
            "0::bigint"
        };
        let sql = format!(
            "SELECT count(*) AS present,
                    count(*) FILTER (WHERE state = 'completed') AS completed,
                    count(*) FILTER (WHERE state = 'discarded') AS discarded,
                    count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
                    count(*) FILTER (WHERE kind = 'chaos.effect' AND effects = 0)
                      AS missing_effects,
                    count(*) FILTER (WHERE kind = 'chaos.effect' AND effects > 1)
                      AS doubled_effects,
                    coalesce(sum(effects) FILTER (WHERE kind = 'chaos.effect'), 0)::bigint
                      AS effects,
                    count(*) FILTER (WHERE state = 'completed'
                                       AND kind IN ('system.flaky', 'chaos.effect')
                                       AND (output ->> 'attempt')::int IS DISTINCT FROM attempt)
                      AS stale_completions
             FROM (SELECT j.kind, j.state::text AS state, j.attempt, j.output,
                          {effects_of_job} AS effects
                   FROM jobs j WHERE j.id = ANY($1)) AS per_job"
        );
        sqlx::query_as(&sql).bind(ids).fetch_one(pool).await
    }

    /// Jobs that were inserted (`inserted` of them) and are no longer there.
    pub(crate) fn lost(&self, inserted: usize) -> i64 {
        inserted as i64 - self.present
    }

    /// Jobs present and not finished.
    pub(crate) fn unfinished(&self) -> i64 {
        self.present - self.completed - self.discarded - self.cancelled
    }

    /// The promise "nothing lost, each job completed, each effect once, each
    /// completion its last attempt's", checked on `outcome` for `inserted` jobs.
    pub(crate) fn check_finished_once(&self, outcome: &mut Outcome, inserted: usize) {
        let lost = self.lost(inserted);
        outcome.check(lost == 0, format!("{lost} of {inserted} jobs were lost"));
        let unfinished = self.unfinished();
        outcome.check(unfinished == 0, format!("{unfinished} jobs never finished"));
        let gave_up = self.discarded + self.cancelled;
        outcome.check(
            gave_up == 0,
            format!("{gave_up} jobs were discarded or cancelled instead of completed"),
        );
        let stale = self.stale_completions;
        outcome.check(
            stale == 0,
            format!("{stale} jobs carry the completion of an attempt that was not their last"),
        );
        let missing = self.missing_effects;
        outcome.check(
            missing == 0,
            format!("{missing} chaos.effect jobs left no effect"),
        );
    }
}
