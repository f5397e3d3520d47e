//! Jobs as the owner's side sees them: the Tasks panel's page (rows, counts by state,
//! the last hour), one job's row and detail, Retry, Cancel and the bulk actions, and
//! the rows of given jobs that live chips read. The panel (`api::tasks`), the tools
//! `tasks.get` and `tasks.list`, and the status poll `GET /api/jobs/status` answer
//! these views; their filters are cleaned in one place ([`filter`]).

use serde::{Deserialize, Serialize};

use crate::model::{JobId, JobState};

/// The most rows a page shows.
pub const PAGE_SIZE: i64 = 50;
#[cfg(feature = "ssr")]
/// Counts stop here; the page shows "10,000+".
pub const COUNT_CAP: i64 = 10_000;
/// The most ids one status poll or bulk action may name.
pub const MAX_STATUS_IDS: usize = 100;

/// A row of the panel, one field per fact; times are already words ("3 s ago", and
/// "2026-11-29 14:03:12 UTC" as the exact one), so the server's page and the browser's
/// hydrated one say exactly the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
pub struct TaskRow {
    // A plain integer in the tools' schemas, as every job id was before it was typed.
    #[cfg_attr(feature = "ssr", schemars(with = "i64"))]
    pub id: JobId,
    pub kind: String,
    pub queue: String,
    pub state: JobState,
    pub attempt: i16,
    pub max_attempts: i16,
    pub last_error: Option<String>,
    /// Why an unfinished job is not moving, when StandMeet knows: no running process
    /// has a handler for its kind (it waits for one that does).
    #[serde(default)]
    pub note: Option<String>,
    /// When it was created, as the panel shows it ("3 s ago" in a `<time>`).
    #[serde(default)]
    pub created_at: Moment,
    /// When it finished (a finished job: see its state), or when it runs next (a job
    /// waiting to run); null while it runs.
    #[serde(default)]
    pub finished_or_next_at: Option<Moment>,
}

/// A moment as a `<time>` shows it: relative words, the exact time as its title, and
/// the machine-readable `datetime`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
pub struct Moment {
    /// "3 s ago", "in 2 min".
    pub relative: String,
    /// "2026-11-29 14:03:12 UTC".
    pub exact: String,
    /// RFC 3339.
    pub iso: String,
}

#[cfg(feature = "ssr")]
impl Moment {
    pub fn of(at: time::OffsetDateTime, now: time::OffsetDateTime) -> Moment {
        let seconds = (now - at).whole_seconds();
        let words = |s: i64| match s {
            0..120 => format!("{s} s"),
            120..7_200 => format!("{} min", s / 60),
            7_200..172_800 => format!("{} h", s / 3_600),
            _ => format!("{} days", s / 86_400),
        };
        Moment {
            relative: if seconds >= 0 {
                format!("{} ago", words(seconds))
            } else {
                format!("in {}", words(-seconds))
            },
            exact: crate::ops::when(at),
            iso: at
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
        }
    }
}

#[cfg(feature = "ssr")]
/// The note of a job whose kind no running StandMeet knows.
pub const NO_HANDLER_NOTE: &str =
    "No running StandMeet knows this kind of job; it waits for one that does (a newer version?).";

/// The filters of the panel, as the URL query carries them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskQuery {
    pub state: Option<String>,
    pub kind: Option<String>,
    pub queue: Option<String>,
    /// A job id, or a JSON object the jobs' arguments contain.
    #[serde(default)]
    pub q: Option<String>,
    pub before: Option<JobId>,
    pub after: Option<JobId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateCount {
    pub state: JobState,
    pub count: i64,
    /// True when the count stopped at the cap.
    pub more: bool,
}

/// One minute of the chart: jobs finished in it, by outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishedMinute {
    /// "14:03" (UTC).
    pub label: String,
    pub completed: i64,
    pub discarded: i64,
    pub cancelled: i64,
}

impl FinishedMinute {
    pub fn total(&self) -> i64 {
        self.completed + self.discarded + self.cancelled
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskPage {
    pub rows: Vec<TaskRow>,
    /// The last hour, a minute each, oldest first (60 of them).
    #[serde(default)]
    pub throughput: Vec<FinishedMinute>,
    pub counts: Vec<StateCount>,
    /// The `before` of the next (older) page, when there is one.
    pub older: Option<JobId>,
    /// Kinds and queues to offer in the filters.
    pub kinds: Vec<String>,
    pub queues: Vec<String>,
}

/// One failed attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptView {
    pub attempt: i16,
    pub at: String,
    pub error: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskDetail {
    pub row: TaskRow,
    pub priority: i16,
    pub args: String,
    pub output: Option<String>,
    pub attempts: Vec<AttemptView>,
    pub scheduled: String,
    pub attempted: Option<String>,
    pub attempted_by: Option<String>,
    pub cancel_requested: bool,
    /// The id of the trace the job was inserted in, when its inserting process exported
    /// traces (every attempt is a span of that trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// Where a trace viewer shows that trace (`STANDMEET_TRACE_URL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_url: Option<String>,
}

/// What Retry or Cancel did, in words for a toast.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskActionResult {
    /// False when the job had moved on and the action no longer applied.
    pub done: bool,
    pub message: String,
}

/// Jobs as `tasks.list` gives them: `{"tasks": [row…], "next_after": id | null}`,
/// newest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
pub struct TaskList {
    pub tasks: Vec<TaskRow>,
    /// The `after` that asks for the next (older) page; null on the last page.
    #[cfg_attr(feature = "ssr", schemars(with = "Option<i64>"))]
    pub next_after: Option<JobId>,
}

/// A bulk action of the panel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bulk {
    Retry,
    Cancel,
    Delete,
}

#[cfg(feature = "ssr")]
pub use operations::*;

#[cfg(feature = "ssr")]
mod operations {
    use std::collections::HashSet;

    use super::*;
    use crate::error::AppError;
    use crate::ops::Operator;
    use crate::ops::paging::{one_page, parse_filter};
    use crate::ops::when;
    use crate::state::AppState;
    use standmeet_jobs::{CancelOutcome, JobFilter, JobRow, JobSummary, RetryOutcome};

    fn row(job: JobSummary, nobody_runs: &HashSet<String>) -> TaskRow {
        let note = (!job.state.is_terminal() && nobody_runs.contains(&job.kind))
            .then(|| NO_HANDLER_NOTE.to_string());
        let now = time::OffsetDateTime::now_utc();
        let finished_or_next_at = match job.finalized_at {
            Some(at) => Some(Moment::of(at, now)),
            None if job.state != JobState::Running => Some(Moment::of(job.scheduled_at, now)),
            None => None,
        };
        TaskRow {
            note,
            created_at: Moment::of(job.created_at, now),
            finished_or_next_at,
            id: job.id,
            kind: job.kind,
            queue: job.queue,
            state: job.state,
            attempt: job.attempt,
            max_attempts: job.max_attempts,
            last_error: job.last_error,
        }
    }

    /// The kinds among `jobs`' unfinished ones that no running StandMeet has a handler
    /// for. Asks the database only when a kind is unknown to this process, which is rare.
    async fn kinds_nobody_runs<'a>(
        state: &AppState,
        jobs: impl IntoIterator<Item = (&'a str, JobState)>,
    ) -> Result<HashSet<String>, standmeet_jobs::Error> {
        let strangers: HashSet<String> = jobs
            .into_iter()
            .filter(|(kind, job_state)| {
                !job_state.is_terminal() && !state.registry.kinds().any(|known| known == *kind)
            })
            .map(|(kind, _)| kind.to_string())
            .collect();
        if strangers.is_empty() {
            return Ok(strangers);
        }
        // A process that renewed within three leases is alive (it renews every third).
        let live = state.settings.job_lease * 3;
        let known = state.jobs.kinds_someone_runs(live).await?;
        Ok(strangers
            .into_iter()
            .filter(|kind| !known.contains(kind))
            .collect())
    }

    /// The kind and state of each job, for [`kinds_nobody_runs`].
    fn summaries(jobs: &[JobSummary]) -> impl Iterator<Item = (&str, JobState)> {
        jobs.iter().map(|job| (job.kind.as_str(), job.state))
    }

    /// A kind or queue filter: trimmed, without control characters (no kind or queue
    /// has any, and PostgreSQL refuses NUL), not empty, not absurdly long.
    fn name_filter(value: Option<String>) -> Option<String> {
        value
            .map(|value| {
                value
                    .chars()
                    .filter(|c| !c.is_control())
                    .collect::<String>()
            })
            .map(|value| value.trim().to_string())
            .filter(|value| !value.is_empty())
            .map(|value| value.chars().take(128).collect())
    }

    /// The filter a panel's query or a tool's arguments ask for, cleaned the one way:
    /// a state is one of the job states (a 400 lists them), a kind or queue is a name
    /// ([`name_filter`]), `q` a job id or a JSON object the arguments contain.
    pub fn filter(query: &TaskQuery) -> Result<JobFilter, AppError> {
        Ok(JobFilter {
            state: parse_filter::<JobState>(query.state.as_deref())?,
            kind: name_filter(query.kind.clone()),
            queue: name_filter(query.queue.clone()),
            before: query.before,
            after: query.after,
            ..search_filter(query.q.as_deref()).map_err(AppError::BadRequest)?
        })
    }

    /// The panel's rows of one filtered page and the kinds nobody runs among them.
    async fn rows_of(state: &AppState, jobs: Vec<JobSummary>) -> Result<Vec<TaskRow>, AppError> {
        let nobody_runs = kinds_nobody_runs(state, summaries(&jobs)).await?;
        Ok(jobs.into_iter().map(|job| row(job, &nobody_runs)).collect())
    }

    /// One page of the Tasks panel: up to [`PAGE_SIZE`] rows, newest first, the counts
    /// by state, the last hour, and what the filters can offer.
    pub async fn page(
        state: &AppState,
        _by: Operator,
        query: &TaskQuery,
    ) -> Result<TaskPage, AppError> {
        let filter = filter(query)?;
        let (jobs, more) = one_page(PAGE_SIZE, |limit| state.jobs.list(&filter, limit)).await?;
        // Paging back towards the newest shows no "older" link.
        let older = (more && filter.after.is_none())
            .then(|| jobs.last().map(|job| job.id))
            .flatten();
        let counts = state
            .jobs
            .count_by_state(COUNT_CAP + 1)
            .await?
            .into_iter()
            .map(|(state, count)| StateCount {
                state,
                count: count.min(COUNT_CAP),
                more: count > COUNT_CAP,
            })
            .collect();
        let mut kinds: Vec<String> = state.registry.kinds().map(str::to_string).collect();
        kinds.sort();
        let queues = state.jobs.queue_names().to_vec();
        let finished = state.jobs.finished_per_minute().await?;
        Ok(TaskPage {
            rows: rows_of(state, jobs).await?,
            throughput: last_hour(time::OffsetDateTime::now_utc(), &finished),
            counts,
            older,
            kinds,
            queues,
        })
    }

    /// Up to `limit` jobs (1 to [`PAGE_SIZE`]; 20 when not given), newest first, as the
    /// panel filters and searches them (`tasks.list`): the query's `before` is the
    /// previous answer's `next_after`, and `next_after` names the last row when older
    /// jobs follow.
    pub async fn list(
        state: &AppState,
        _by: Operator,
        query: &TaskQuery,
        limit: Option<i64>,
    ) -> Result<TaskList, AppError> {
        let limit = limit.unwrap_or(20);
        if !(1..=PAGE_SIZE).contains(&limit) {
            return Err(AppError::BadRequest(format!(
                "limit must be from 1 to {PAGE_SIZE}; it was {limit}."
            )));
        }
        let filter = filter(query)?;
        let (jobs, more) = one_page(limit, |limit| state.jobs.list(&filter, limit)).await?;
        let next_after = more.then(|| jobs.last().map(|job| job.id)).flatten();
        Ok(TaskList {
            tasks: rows_of(state, jobs).await?,
            next_after,
        })
    }

    /// One job's row (`tasks.get`); 404 in words for a job that is not there.
    pub async fn get(state: &AppState, _by: Operator, id: JobId) -> Result<TaskRow, AppError> {
        let jobs = state.jobs.summaries(&[id]).await?;
        rows_of(state, jobs)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| AppError::NotFound(format!("There is no job {id}.")))
    }

    fn pretty(value: &serde_json::Value) -> String {
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    }

    fn detail_of(job: JobRow) -> TaskDetail {
        let trace_id = job.trace_id().map(str::to_string);
        let attempts = job
            .attempt_errors()
            .into_iter()
            .map(|error| AttemptView {
                attempt: error.attempt,
                at: when(error.at),
                error: error.error,
            })
            .collect();
        let summary = JobSummary {
            id: job.id,
            kind: job.kind.clone(),
            queue: job.queue.clone(),
            state: job.state,
            attempt: job.attempt,
            max_attempts: job.max_attempts,
            created_at: job.created_at,
            scheduled_at: job.scheduled_at,
            finalized_at: job.finalized_at,
            last_error: job.attempt_errors().last().map(|error| error.error.clone()),
        };
        TaskDetail {
            row: row(summary, &HashSet::new()),
            priority: job.priority,
            args: pretty(&job.args),
            output: job.output.as_ref().map(pretty),
            attempts,
            scheduled: when(job.scheduled_at),
            attempted: job.attempted_at.map(when),
            attempted_by: job.attempted_by,
            cancel_requested: job.cancel_requested_at.is_some(),
            trace_id,
            trace_url: None,
        }
    }

    /// One job in full (its page): arguments, output, every attempt's error; `None`
    /// when there is no such job.
    pub async fn detail(
        state: &AppState,
        _by: Operator,
        id: JobId,
    ) -> Result<Option<TaskDetail>, AppError> {
        let Some(job) = state.jobs.get(id).await? else {
            return Ok(None);
        };
        let mut detail = detail_of(job);
        detail.trace_url = detail
            .trace_id
            .as_deref()
            .zip(state.settings.trace_url.as_deref())
            .map(|(trace_id, url)| url.replace("{trace_id}", trace_id));
        let nobody_runs =
            kinds_nobody_runs(state, [(detail.row.kind.as_str(), detail.row.state)]).await?;
        if !nobody_runs.is_empty() {
            detail.row.note = Some(NO_HANDLER_NOTE.to_string());
        }
        Ok(Some(detail))
    }

    /// Retry: a retryable, discarded or cancelled job runs again now.
    pub async fn retry(
        state: &AppState,
        by: Operator,
        id: JobId,
    ) -> Result<TaskActionResult, AppError> {
        let outcome = state.jobs.retry(id).await?;
        tracing::info!(job.id = id.0, ?by, ?outcome, "a job was retried");
        Ok(match outcome {
            RetryOutcome::Retried => TaskActionResult {
                done: true,
                message: format!("Retry of job {id} queued: it runs again shortly."),
            },
            RetryOutcome::NotRetryable(now) => TaskActionResult {
                done: false,
                message: format!(
                    "Job {id} is {now} now, so there is nothing to retry. Only retryable, discarded or cancelled jobs can be retried."
                ),
            },
            RetryOutcome::NotFound => TaskActionResult {
                done: false,
                message: format!("There is no job {id} any more."),
            },
        })
    }

    /// Cancel: a job that has not run is cancelled at once; a running one is stopped.
    pub async fn cancel(
        state: &AppState,
        by: Operator,
        id: JobId,
    ) -> Result<TaskActionResult, AppError> {
        let outcome = state.jobs.cancel(id).await?;
        tracing::info!(job.id = id.0, ?by, ?outcome, "a job was cancelled");
        Ok(match outcome {
            CancelOutcome::Cancelled => TaskActionResult {
                done: true,
                message: format!("Job {id} cancelled."),
            },
            CancelOutcome::Requested => TaskActionResult {
                done: true,
                message: format!(
                    "Cancel of job {id} requested: its running attempt is being stopped."
                ),
            },
            CancelOutcome::AlreadyFinal(now) => TaskActionResult {
                done: false,
                message: format!("Job {id} is already {now}, so there is nothing to cancel."),
            },
            CancelOutcome::NotFound => TaskActionResult {
                done: false,
                message: format!("There is no job {id} any more."),
            },
        })
    }

    /// The search box: a job id, or a JSON object the arguments contain; empty is none.
    pub fn search_filter(q: Option<&str>) -> Result<JobFilter, String> {
        const HOW: &str = "Search by a job id (42) or by a JSON object its arguments contain, such as {\"request_id\": 7}.";
        let Some(q) = q.map(str::trim).filter(|q| !q.is_empty()) else {
            return Ok(JobFilter::default());
        };
        if let Ok(id) = q.trim_start_matches('#').parse::<i64>() {
            return Ok(JobFilter {
                id: Some(JobId(id)),
                ..Default::default()
            });
        }
        match serde_json::from_str::<serde_json::Value>(q) {
            Ok(args) if args.is_object() => Ok(JobFilter {
                args: Some(args),
                ..Default::default()
            }),
            Ok(_) => Err(format!("{q:?} is not a JSON object. {HOW}")),
            Err(err) if q.starts_with('{') => {
                Err(format!("{q:?} is not valid JSON ({err}). {HOW}"))
            }
            Err(_) => Err(HOW.to_string()),
        }
    }

    impl Bulk {
        fn done(self) -> &'static str {
            match self {
                Bulk::Retry => "retried",
                Bulk::Cancel => "cancelled",
                Bulk::Delete => "deleted",
            }
        }
    }

    /// A bulk action on the selected jobs (at most [`MAX_STATUS_IDS`]), in one
    /// transaction; says how many changed and why the others did not.
    pub async fn bulk(
        state: &AppState,
        by: Operator,
        mut ids: Vec<JobId>,
        action: Bulk,
    ) -> Result<TaskActionResult, AppError> {
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Err(AppError::BadRequest("Select the jobs first.".into()));
        }
        if ids.len() > MAX_STATUS_IDS {
            return Err(AppError::BadRequest(format!(
                "At most {MAX_STATUS_IDS} jobs at once; {} were selected.",
                ids.len()
            )));
        }
        let outcome = match action {
            Bulk::Retry => state.jobs.retry_many(&ids).await,
            Bulk::Cancel => state.jobs.cancel_many(&ids).await,
            Bulk::Delete => state.jobs.delete_many(&ids).await,
        }?;
        tracing::info!(
            ?action,
            changed = outcome.changed.len(),
            unchanged = outcome.unchanged.len(),
            ?by,
            "a bulk action on jobs"
        );
        Ok(bulk_message(action, &outcome))
    }

    /// "3 jobs retried." or "1 job retried; 2 could not be: job 5 is running, job 9 is
    /// gone."
    /// The 60 minutes up to `now`'s, oldest first, with what finished in each.
    pub fn last_hour(
        now: time::OffsetDateTime,
        finished: &[standmeet_jobs::FinishedInMinute],
    ) -> Vec<FinishedMinute> {
        let this_minute = now.unix_timestamp().div_euclid(60);
        (0..60)
            .rev()
            .map(|ago| {
                let minute = this_minute - ago;
                let at = time::OffsetDateTime::from_unix_timestamp(minute * 60)
                    .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
                let mut bar = FinishedMinute {
                    label: format!("{:02}:{:02}", at.hour(), at.minute()),
                    ..Default::default()
                };
                for row in finished
                    .iter()
                    .filter(|row| row.minute.unix_timestamp().div_euclid(60) == minute)
                {
                    match row.state {
                        JobState::Completed => bar.completed += row.finished,
                        JobState::Discarded => bar.discarded += row.finished,
                        JobState::Cancelled => bar.cancelled += row.finished,
                        _ => {}
                    }
                }
                bar
            })
            .collect()
    }

    /// What a bulk action did, in words: how many changed, and why the others did not.
    pub fn bulk_message(action: Bulk, outcome: &standmeet_jobs::BulkOutcome) -> TaskActionResult {
        let count = outcome.changed.len();
        let mut message = format!(
            "{count} job{} {}",
            if count == 1 { "" } else { "s" },
            action.done()
        );
        if outcome.unchanged.is_empty() {
            message.push('.');
        } else {
            let why: Vec<String> = outcome
                .unchanged
                .iter()
                .map(|(id, job_state)| match job_state {
                    Some(job_state) => format!("job {} is {}", id.0, job_state.as_str()),
                    None => format!("job {} is gone", id.0),
                })
                .collect();
            message.push_str(&format!(
                "; {} could not be: {}.",
                outcome.unchanged.len(),
                why.join(", ")
            ));
        }
        TaskActionResult {
            done: count > 0,
            message,
        }
    }

    /// The panel rows of these jobs (those that exist, at most [`MAX_STATUS_IDS`]):
    /// what a live page reads when the stream says a job changed.
    pub async fn rows(
        state: &AppState,
        _by: Operator,
        ids: Vec<JobId>,
    ) -> Result<Vec<TaskRow>, AppError> {
        if ids.len() > MAX_STATUS_IDS {
            return Err(AppError::BadRequest(format!(
                "At most {MAX_STATUS_IDS} job ids at once; {} were asked for.",
                ids.len()
            )));
        }
        rows_of(state, state.jobs.summaries(&ids).await?).await
    }

    /// The rows of the jobs a status poll names (parsed by [`parse_status_ids`]), and
    /// the ids that are not there.
    pub async fn status(
        state: &AppState,
        ids: &[JobId],
    ) -> Result<(Vec<TaskRow>, Vec<JobId>), AppError> {
        let jobs = state.jobs.summaries(ids).await?;
        let unknown = ids
            .iter()
            .filter(|id| !jobs.iter().any(|job| job.id == **id))
            .copied()
            .collect();
        Ok((rows_of(state, jobs).await?, unknown))
    }

    /// `"1,2,3"` → ids; a message a person understands otherwise.
    pub fn parse_status_ids(raw: Option<&str>) -> Result<Vec<JobId>, String> {
        let raw = raw.map(str::trim).unwrap_or_default();
        if raw.is_empty() {
            return Err("Give the job ids to look up, as ?ids=1,2,3.".into());
        }
        let mut ids = Vec::new();
        for part in raw.split(',').map(str::trim) {
            match part.parse::<i64>() {
                Ok(id) if id > 0 => {
                    if !ids.contains(&JobId(id)) {
                        ids.push(JobId(id));
                    }
                }
                _ => {
                    return Err(format!(
                        "{part:?} is not a job id: job ids are whole numbers above zero."
                    ));
                }
            }
        }
        if ids.len() > MAX_STATUS_IDS {
            return Err(format!(
                "At most {MAX_STATUS_IDS} job ids at once; {} were asked for.",
                ids.len()
            ));
        }
        Ok(ids)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn status_ids_parse_or_say_what_is_wrong() {
            assert_eq!(
                parse_status_ids(Some("3, 1,3")).unwrap(),
                vec![JobId(3), JobId(1)]
            );
            assert!(parse_status_ids(None).unwrap_err().contains("?ids=1,2,3"));
            assert!(
                parse_status_ids(Some("1,abc"))
                    .unwrap_err()
                    .contains("\"abc\" is not a job id")
            );
            assert!(
                parse_status_ids(Some("-4"))
                    .unwrap_err()
                    .contains("not a job id")
            );
            let many = (1..=101)
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(",");
            assert!(
                parse_status_ids(Some(&many))
                    .unwrap_err()
                    .contains("At most 100")
            );
        }

        #[test]
        fn times_read_the_same_everywhere() {
            let at = time::macros::datetime!(2026-11-29 14:03:12.345 +02:00);
            assert_eq!(when(at), "2026-11-29 12:03:12 UTC");
        }
    }
}
