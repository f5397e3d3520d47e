//! Periodic jobs: schedules kept in `job_schedules` (River's periodic jobs, Oban's
//! Cron, graphile-worker's crontab), changed while the engines run.
//!
//! A schedule names a cron expression, read in one time zone, and the job it inserts at
//! each of its slots. Slots are found in the zone's local ("civil") time, where croner
//! does the cron arithmetic without any time zone (it is handed local times as if they
//! were UTC), and each local slot is then placed on the time line by jiff:
//! - a local time that does not exist (the hour skipped when clocks spring forward) is
//!   no slot at all;
//! - a local time that happens twice (the hour repeated when clocks fall back) is one
//!   slot, at its first occurrence.
//!
//! Schedules are read and changed through [`JobClient`] (`schedules`,
//! `set_schedule`, `run_schedule_now`, …). Each engine with a time zone for its
//! schedules ([`EngineConfig::schedules`]) fires what is due once a second (`fire_due`);
//! see the migration of `job_schedules` for how N copies fire a slot once and how
//! missed slots are made up once. The statements are in `store::schedule`.
//!
//! [`EngineConfig::schedules`]: crate::EngineConfig::schedules

use std::str::FromStr;

use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{Timestamp, civil};
use serde::Serialize;
use sqlx::PgPool;
use time::OffsetDateTime;

use super::client::JobClient;
use super::insert::{InsertOptions, Inserted, insert_unique_by_name};
use super::registry::{KindDefaults, Registry};
use super::store::{self, NewSchedule, ScheduleUpdate};
use super::{Error, JobId, JobState};

/// The client's calls about schedules.
impl JobClient {
    /// The schedules of periodic jobs, by name, their next slots read in `tz`.
    pub async fn schedules(&self, tz: &TimeZone) -> Result<Vec<Schedule>, Error> {
        list(self.pool(), tz).await
    }

    /// One schedule, as [`JobClient::schedules`] shows it.
    pub async fn schedule(&self, tz: &TimeZone, name: &str) -> Result<Schedule, Error> {
        get(self.pool(), tz, name).await
    }

    /// Creates the schedule `change.name` or changes it, checking everything first
    /// (its cron expression, a kind that `registry` runs, args that are a JSON object)
    /// and writing nothing when something is wrong. A schedule created, enabled or
    /// given a new expression counts its slots from now on.
    pub async fn set_schedule(
        &self,
        registry: &Registry,
        tz: &TimeZone,
        change: ScheduleChange,
    ) -> Result<Schedule, Error> {
        set(self.pool(), registry, tz, change).await
    }

    /// Creates the schedule `change` (which names its cron, kind and queue) unless one
    /// of its name exists: a built-in schedule, whose admin may have changed it since.
    pub async fn create_missing_schedule(&self, change: ScheduleChange) -> Result<(), Error> {
        create_missing(self.pool(), change).await
    }

    /// Inserts schedule `name`'s job now ("Run now"), unless its newest job has not
    /// finished: then answers that one as a duplicate.
    pub async fn run_schedule_now(
        &self,
        registry: &Registry,
        name: &str,
    ) -> Result<Inserted, Error> {
        run_now(self.pool(), registry, name).await
    }
}

/// The longest cron expression taken: the longest useful one is far shorter.
pub(crate) const MAX_CRON_CHARS: usize = 200;

/// A cron expression: five fields (minute, hour, day of month, month, day of week), or
/// `@hourly`, `@daily`, `@weekly` (and croner's other nicknames).
#[derive(Clone, Debug)]
pub(crate) struct CronExpr {
    text: String,
    cron: croner::Cron,
}

impl FromStr for CronExpr {
    type Err = Error;

    /// Refuses (`Error::Refused`) an expression that does not parse or never matches,
    /// naming the field at fault.
    fn from_str(text: &str) -> Result<Self, Error> {
        let text = text.trim();
        let bad = |why: String| {
            let cron: String = text.chars().take(60).collect();
            let why = why.trim_end_matches('.');
            Error::Refused(format!(
                "The cron expression \"{cron}\" cannot be used: {why}."
            ))
        };
        if text.chars().count() > MAX_CRON_CHARS {
            return Err(bad(format!(
                "it is {} characters long; a cron expression has at most {MAX_CRON_CHARS}",
                text.chars().count()
            )));
        }
        if text.is_empty() {
            return Err(bad("it is empty".into()));
        }
        let cron = parse_five_fields(text).map_err(|err| bad(why_refused(text, &err)))?;
        let expr = CronExpr {
            text: text.to_string(),
            cron,
        };
        // A pattern that never matches (`0 0 31 2 *`) is refused now, not at its first
        // firing.
        if expr
            .next_local(civil::date(2000, 1, 1).at(0, 0, 0, 0))
            .is_none()
        {
            return Err(bad("it never matches a real date".into()));
        }
        Ok(expr)
    }
}

fn parse_five_fields(text: &str) -> Result<croner::Cron, croner::errors::CronError> {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(text)
}

/// The five fields, with the values each takes, for saying which one is wrong.
const FIELDS: [(&str, &str); 5] = [
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31"),
    ("month", "1-12 or JAN-DEC"),
    ("day-of-week", "0-7 or SUN-SAT"),
];

/// Why croner refused `text`, in words that name the field at fault: the field whose
/// replacement by `*` makes the rest parse (croner judges each field; nothing here reads
/// cron syntax).
fn why_refused(text: &str, err: &croner::errors::CronError) -> String {
    let fields: Vec<&str> = text.split_whitespace().collect();
    if !text.starts_with('@') && fields.len() != FIELDS.len() {
        return format!(
            "it has {} field{}; a cron expression has five: minute hour day-of-month month day-of-week (e.g. \"0 3 * * *\"), or @hourly, @daily, @weekly",
            fields.len(),
            if fields.len() == 1 { "" } else { "s" }
        );
    }
    for (at, (name, range)) in FIELDS.iter().enumerate() {
        let mut others = fields.clone();
        others[at] = "*";
        if parse_five_fields(&others.join(" ")).is_ok() {
            let value: String = fields[at].chars().take(40).collect();
            return format!(
                "its {name} field \"{value}\" is not valid (it takes {range}, lists, ranges and steps such as */15)"
            );
        }
    }
    use croner::errors::CronError::*;
    match err {
        EmptyPattern => "it is empty".into(),
        InvalidPattern(why) | IllegalCharacters(why) | ComponentError(why) => why.clone(),
        other => other.to_string(),
    }
}

impl CronExpr {
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// What it means, in English ("At 03:00 every day" and the like).
    pub(crate) fn describe(&self) -> String {
        self.cron.describe()
    }

    /// The newest slot at or before `at`, in `tz`.
    pub(crate) fn latest_slot(&self, tz: &TimeZone, at: Timestamp) -> Option<Timestamp> {
        let mut local = tz.to_datetime(at);
        // Slots are whole minutes; a bounded walk back over local slots that do not
        // exist (a spring-forward gap holds at most a few of them in a row).
        for _ in 0..1_000 {
            let slot = self.previous_local(local)?;
            if let Some(instant) = first_occurrence(tz, slot)
                && instant <= at
            {
                return Some(instant);
            }
            local = slot.checked_sub(jiff::Span::new().minutes(1)).ok()?;
        }
        None
    }

    /// The first slot after `after`, in `tz`.
    pub(crate) fn next_slot(&self, tz: &TimeZone, after: Timestamp) -> Option<Timestamp> {
        let mut local = tz.to_datetime(after);
        for _ in 0..1_000 {
            let slot = self.next_local(local)?;
            if let Some(instant) = first_occurrence(tz, slot)
                && instant > after
            {
                return Some(instant);
            }
            local = slot;
        }
        None
    }

    /// The first local slot strictly after `local`.
    fn next_local(&self, local: civil::DateTime) -> Option<civil::DateTime> {
        let found = self
            .cron
            .find_next_occurrence(&as_floating(local)?, false)
            .ok()?;
        from_floating(found)
    }

    /// The newest local slot at or before `local`.
    fn previous_local(&self, local: civil::DateTime) -> Option<civil::DateTime> {
        let found = self
            .cron
            .find_previous_occurrence(&as_floating(local)?, true)
            .ok()?;
        from_floating(found)
    }
}

/// The instant a local time first happens in `tz`: none in a gap, the earlier of two
/// in a fold.
fn first_occurrence(tz: &TimeZone, local: civil::DateTime) -> Option<Timestamp> {
    let ambiguous = tz.to_ambiguous_timestamp(local);
    match ambiguous.offset() {
        AmbiguousOffset::Gap { .. } => None,
        AmbiguousOffset::Unambiguous { .. } | AmbiguousOffset::Fold { .. } => {
            ambiguous.earlier().ok()
        }
    }
}

/// A local time as croner's UTC, to do cron arithmetic with no time zone in the way.
fn as_floating(local: civil::DateTime) -> Option<chrono::DateTime<chrono::Utc>> {
    let date = chrono::NaiveDate::from_ymd_opt(
        local.year().into(),
        local.month().try_into().ok()?,
        local.day().try_into().ok()?,
    )?;
    let time = chrono::NaiveTime::from_hms_opt(
        local.hour().try_into().ok()?,
        local.minute().try_into().ok()?,
        local.second().try_into().ok()?,
    )?;
    Some(chrono::DateTime::from_naive_utc_and_offset(
        date.and_time(time),
        chrono::Utc,
    ))
}

fn from_floating(floating: chrono::DateTime<chrono::Utc>) -> Option<civil::DateTime> {
    use chrono::{Datelike, Timelike};
    let naive = floating.naive_utc();
    civil::DateTime::new(
        i16::try_from(naive.year()).ok()?,
        i8::try_from(naive.month()).ok()?,
        i8::try_from(naive.day()).ok()?,
        i8::try_from(naive.hour()).ok()?,
        i8::try_from(naive.minute()).ok()?,
        0,
        0,
    )
    .ok()
}

/// The unique key of a schedule's firing at `slot`.
pub(crate) fn slot_key(name: &str, slot: Timestamp) -> String {
    format!("schedule:{name}:{slot}")
}

/// The words for what a schedule's change can get wrong (each an `Error::Refused`).
mod refusal {
    pub(super) const BAD_NAME: &str = "A schedule's name is 1 to 64 lowercase letters, digits, '-' or '_', starting with a letter or digit.";
    pub(super) const ARGS_NOT_AN_OBJECT: &str =
        "Args must be a JSON object, such as {} or {\"source_id\": 1}.";
    pub(super) const ARGS_WITH_NUL: &str = "Args cannot hold a NUL character (\\u0000).";
    pub(super) const BAD_QUEUE: &str =
        "A queue's name is 1 to 64 characters, none of them a control character.";
}

fn refused(words: &str) -> Error {
    Error::Refused(words.to_string())
}

fn missing(what: &str) -> Error {
    Error::Refused(format!("A new schedule needs {what}."))
}

/// A schedule as `schedules.list` shows it.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Schedule {
    /// Its name, which identifies it.
    #[cfg_attr(feature = "schemars", schemars(description = ""))]
    pub name: String,
    /// Its cron expression (five fields, or six with seconds).
    #[cfg_attr(feature = "schemars", schemars(description = ""))]
    pub cron: String,
    /// The cron expression in words (for pages; not part of `schedules.list`).
    #[serde(skip)]
    pub description: String,
    /// The time zone its slots are read in.
    #[cfg_attr(feature = "schemars", schemars(description = ""))]
    pub timezone: String,
    /// The kind of the job it inserts.
    #[cfg_attr(feature = "schemars", schemars(description = ""))]
    pub kind: String,
    #[cfg_attr(feature = "schemars", schemars(schema_with = "any_json"))]
    /// The job's arguments.
    #[cfg_attr(feature = "schemars", schemars(description = ""))]
    pub args: serde_json::Value,
    /// The job's queue.
    #[cfg_attr(feature = "schemars", schemars(description = ""))]
    pub queue: String,
    /// Whether it fires.
    #[cfg_attr(feature = "schemars", schemars(description = ""))]
    pub enabled: bool,
    /// RFC 3339; `None` while disabled.
    pub next_run_at: Option<String>,
    /// The newest job it inserted, while that is kept.
    #[cfg_attr(feature = "schemars", schemars(description = ""))]
    pub last_run: Option<LastRun>,
}

/// The schema of any JSON value, written `{}`: schemars writes `true`, which JSON Schema
/// allows but MCP clients refuse as a property's schema.
#[cfg(feature = "schemars")]
fn any_json(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "description": "Any JSON value." })
}

/// The newest job a schedule inserted, while it is kept.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct LastRun {
    /// The job.
    #[cfg_attr(feature = "schemars", schemars(description = ""))]
    pub job_id: JobId,
    /// Its state now.
    #[cfg_attr(feature = "schemars", schemars(description = ""))]
    pub state: JobState,
    /// When it was inserted, RFC 3339.
    pub at: String,
}

/// A schedule to create or change (`schedules.set`): what is `None` stays as it is, or
/// takes its default on a new one (args `{}`, the kind's queue, enabled).
#[derive(Clone, Debug, Default)]
pub struct ScheduleChange {
    /// The schedule's name.
    pub name: String,
    /// A new cron expression.
    pub cron: Option<String>,
    /// A new kind for its job.
    pub kind: Option<String>,
    /// New arguments for its job (a JSON object).
    pub args: Option<serde_json::Value>,
    /// A new queue for its job.
    pub queue: Option<String>,
    /// Whether it fires.
    pub enabled: Option<bool>,
}

/// The schedules, by name, as of now.
pub(crate) async fn list(pool: &PgPool, tz: &TimeZone) -> Result<Vec<Schedule>, Error> {
    let rows = store::schedule_list(pool)
        .await
        .map_err(Error::from_database)?;
    let now = Timestamp::now();
    Ok(rows
        .into_iter()
        .map(|row| {
            let cron = CronExpr::from_str(&row.cron).ok();
            let last_run = match (row.job_id, row.job_state, row.last_run_at) {
                (Some(job_id), Some(state), Some(at)) => Some(LastRun {
                    job_id,
                    state,
                    at: timestamp(at).to_string(),
                }),
                _ => None,
            };
            Schedule {
                description: cron.as_ref().map(CronExpr::describe).unwrap_or_default(),
                next_run_at: cron
                    .filter(|_| row.enabled)
                    .and_then(|cron| cron.next_slot(tz, now))
                    .map(|slot| slot.to_string()),
                name: row.name,
                cron: row.cron,
                timezone: tz.iana_name().unwrap_or("UTC").to_string(),
                kind: row.kind,
                args: row.args,
                queue: row.queue,
                enabled: row.enabled,
                last_run,
            }
        })
        .collect())
}

/// One schedule, as [`list`] shows it.
pub(crate) async fn get(pool: &PgPool, tz: &TimeZone, name: &str) -> Result<Schedule, Error> {
    if !valid_name(name) {
        return Err(not_found(name));
    }
    list(pool, tz)
        .await?
        .into_iter()
        .find(|schedule| schedule.name == name)
        .ok_or_else(|| not_found(name))
}

/// `Error::NotFound`, with at most 64 characters of the name asked for.
fn not_found(name: &str) -> Error {
    let name: String = name.chars().take(64).collect();
    Error::NotFound(format!("No schedule is named {name:?}."))
}

/// Creates the schedule `change.name` or changes it; checks everything first and
/// writes nothing when something is wrong. A schedule created, enabled or given a new
/// expression counts its slots from now on.
pub(crate) async fn set(
    pool: &PgPool,
    registry: &Registry,
    tz: &TimeZone,
    change: ScheduleChange,
) -> Result<Schedule, Error> {
    if !valid_name(&change.name) {
        return Err(refused(refusal::BAD_NAME));
    }
    let cron = change.cron.as_deref().map(CronExpr::from_str).transpose()?;
    let defaults = change
        .kind
        .as_deref()
        .map(|kind| kind_defaults(registry, kind))
        .transpose()?;
    if let Some(args) = &change.args {
        if !args.is_object() {
            return Err(refused(refusal::ARGS_NOT_AN_OBJECT));
        }
        // PostgreSQL's jsonb cannot hold it.
        if args.to_string().contains("\\u0000") {
            return Err(refused(refusal::ARGS_WITH_NUL));
        }
    }
    if let Some(queue) = &change.queue
        && (!(1..=64).contains(&queue.chars().count()) || queue.chars().any(char::is_control))
    {
        return Err(refused(refusal::BAD_QUEUE));
    }
    let mut tx = pool.begin().await.map_err(Error::from_database)?;
    if store::schedule_lock(&mut tx, &change.name)
        .await
        .map_err(Error::from_database)?
    {
        let update = ScheduleUpdate {
            name: &change.name,
            cron: cron.as_ref().map(CronExpr::as_str),
            kind: change.kind.as_deref(),
            args: change.args,
            queue: change.queue.as_deref(),
            enabled: change.enabled,
        };
        store::schedule_update(&mut tx, update)
            .await
            .map_err(Error::from_database)?;
    } else {
        let cron = cron.as_ref().ok_or_else(|| missing("a cron expression"))?;
        let (kind, defaults) = change
            .kind
            .as_deref()
            .zip(defaults)
            .ok_or_else(|| missing("a kind"))?;
        let new = NewSchedule {
            name: &change.name,
            cron: cron.as_str(),
            kind,
            args: change.args.unwrap_or_else(|| serde_json::json!({})),
            queue: change.queue.as_deref().unwrap_or(defaults.queue),
            enabled: change.enabled.unwrap_or(true),
        };
        store::schedule_insert_missing(&mut *tx, new)
            .await
            .map_err(Error::from_database)?;
    }
    tx.commit().await.map_err(Error::from_database)?;
    get(pool, tz, &change.name).await
}

/// Creates `schedule` unless one of its name exists (a built-in schedule, whose admin
/// may have changed it since).
pub(crate) async fn create_missing(pool: &PgPool, change: ScheduleChange) -> Result<(), Error> {
    let cron = CronExpr::from_str(change.cron.as_deref().unwrap_or_default())?;
    let kind = change.kind.ok_or_else(|| missing("a kind"))?;
    let queue = change.queue.ok_or_else(|| missing("a queue"))?;
    let new = NewSchedule {
        name: &change.name,
        cron: cron.as_str(),
        kind: &kind,
        args: change.args.unwrap_or_else(|| serde_json::json!({})),
        queue: &queue,
        enabled: change.enabled.unwrap_or(true),
    };
    store::schedule_insert_missing(pool, new)
        .await
        .map_err(Error::from_database)?;
    Ok(())
}

/// Inserts the schedule's job now ("Run now"), unless its newest job has not finished:
/// then answers that one as a duplicate.
pub(crate) async fn run_now(
    pool: &PgPool,
    registry: &Registry,
    name: &str,
) -> Result<Inserted, Error> {
    // A name no schedule can have (one with a NUL, which PostgreSQL cannot even
    // compare) is answered without asking.
    if !valid_name(name) {
        return Err(not_found(name));
    }
    let mut tx = pool.begin().await.map_err(Error::from_database)?;
    let schedule = store::schedule_lock_to_run(&mut tx, name)
        .await
        .map_err(Error::from_database)?
        .ok_or_else(|| not_found(name))?;
    if let Some(pending) = schedule.pending {
        return Ok(Inserted {
            id: pending,
            duplicate: true,
        });
    }
    let defaults = kind_defaults(registry, &schedule.kind)?;
    let key = format!("schedule:{name}:run-now:{}", Timestamp::now());
    let inserted = insert_unique_by_name(
        &mut tx,
        &schedule.kind,
        &schedule.queue,
        defaults,
        &schedule.args,
        &key,
        InsertOptions::default(),
    )
    .await?;
    store::schedule_record_run(&mut tx, name, inserted.id)
        .await
        .map_err(Error::from_database)?;
    tx.commit().await.map_err(Error::from_database)?;
    Ok(inserted)
}

/// Inserts the job of every enabled schedule whose newest slot at or before `now` is
/// past what it accounted for; answers what each firing inserted. Only the process whose
/// update moves `fired_through` forward inserts, so N copies fire a slot once; a
/// schedule of a kind this process cannot run is left to a process that can.
pub(crate) async fn fire_due(
    pool: &PgPool,
    registry: &Registry,
    tz: &TimeZone,
    now: Timestamp,
) -> Result<Vec<(String, Inserted)>, Error> {
    let schedules = store::schedule_enabled(pool)
        .await
        .map_err(Error::from_database)?;
    let mut fired = Vec::new();
    for schedule in schedules {
        let Ok(cron) = CronExpr::from_str(&schedule.cron) else {
            continue;
        };
        let Some(defaults) = registry.defaults(&schedule.kind) else {
            continue;
        };
        let Some(slot) = cron.latest_slot(tz, now) else {
            continue;
        };
        if slot <= timestamp(schedule.fired_through) {
            continue;
        }
        let firing = fire(pool, &schedule.name, defaults, slot);
        // A firing starts a trace of its own when this process carries traces: its
        // job's attempts are then spans of that trace (see `trace`).
        let inserted = match crate::trace::traces() {
            None => firing.await?,
            Some(_) => {
                let span = tracing::info_span!(
                    parent: None,
                    "schedule.fire",
                    schedule = %schedule.name,
                    job.kind = %schedule.kind,
                );
                tracing::Instrument::instrument(firing, span).await?
            }
        };
        if let Some(inserted) = inserted {
            fired.push((schedule.name, inserted));
        }
    }
    Ok(fired)
}

/// Fires schedule `name` for `slot`, unless another process did (or it was disabled,
/// or changed) meanwhile.
async fn fire(
    pool: &PgPool,
    name: &str,
    defaults: KindDefaults,
    slot: Timestamp,
) -> Result<Option<Inserted>, Error> {
    let mut tx = pool.begin().await.map_err(Error::from_database)?;
    let Some(schedule) = store::schedule_claim_slot(&mut tx, name, offset_date_time(slot)?)
        .await
        .map_err(Error::from_database)?
    else {
        return Ok(None);
    };
    let inserted = insert_unique_by_name(
        &mut tx,
        &schedule.kind,
        &schedule.queue,
        defaults,
        &schedule.args,
        &slot_key(name, slot),
        InsertOptions::default(),
    )
    .await?;
    store::schedule_record_run(&mut tx, name, inserted.id)
        .await
        .map_err(Error::from_database)?;
    tx.commit().await.map_err(Error::from_database)?;
    tracing::info!(schedule = name, %slot, job = %inserted.id, "a schedule fired");
    Ok(Some(inserted))
}

fn kind_defaults(registry: &Registry, kind: &str) -> Result<KindDefaults, Error> {
    registry.defaults(kind).ok_or_else(|| {
        let kind: String = kind.chars().take(128).collect();
        let mut kinds: Vec<&str> = registry.kinds().collect();
        kinds.sort();
        Error::Refused(format!(
            "No StandMeet process runs jobs of kind \"{kind}\"; the kinds are: {}.",
            kinds.join(", ")
        ))
    })
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn timestamp(at: OffsetDateTime) -> Timestamp {
    Timestamp::from_nanosecond(at.unix_timestamp_nanos()).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn offset_date_time(at: Timestamp) -> Result<OffsetDateTime, Error> {
    OffsetDateTime::from_unix_timestamp_nanos(at.as_nanosecond()).map_err(|_| {
        Error::Refused(format!(
            "the slot {at} is outside the time the database keeps"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(tz: &TimeZone, local: &str) -> Timestamp {
        let local: civil::DateTime = local.parse().unwrap();
        tz.to_ambiguous_timestamp(local).earlier().unwrap()
    }

    fn cron(text: &str) -> CronExpr {
        text.parse().unwrap()
    }

    #[test]
    fn five_fields_and_nicknames_parse_and_say_what_they_mean() {
        assert_eq!(
            cron("0 3 * * *").describe(),
            cron("@daily").describe().replace("00:00", "03:00")
        );
        for ok in [
            "0 * * * *",
            "*/15 9-17 * * MON-FRI",
            "@hourly",
            "@weekly",
            "0 3 * * 0",
        ] {
            assert!(ok.parse::<CronExpr>().is_ok(), "{ok}");
        }
    }

    #[test]
    fn a_bad_expression_is_refused_naming_what_is_wrong() {
        for (bad, words) in [
            ("", "empty"),
            ("0 3 * *", "it has 4 fields"),
            ("hello", "it has 1 field;"),
            ("61 * * * *", "minute field \"61\""),
            ("0 25 * * *", "hour field \"25\""),
            ("0 3 * 13 *", "month field \"13\""),
            ("0 3 * * FUNDAY", "day-of-week field"),
            ("0 0 0 3 * * *", "it has 7 fields"),
            ("0 0 31 2 *", "never"),
        ] {
            let err = bad.parse::<CronExpr>().unwrap_err().to_string();
            assert!(err.to_lowercase().contains(words), "{bad:?}: {err}");
        }
        let long = "1,".repeat(2_500) + "1 * * * *";
        let err = long.parse::<CronExpr>().unwrap_err().to_string();
        assert!(err.contains("at most 200"), "{err}");
        assert!(
            err.len() < 300,
            "the answer does not repeat the whole input"
        );
    }

    #[test]
    fn a_local_time_skipped_in_spring_is_no_slot_and_one_repeated_in_autumn_fires_once() {
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        // 2026-03-29: 02:00 → 03:00. "30 2 * * *" has no slot that day.
        let daily = cron("30 2 * * *");
        let before = slot(&berlin, "2026-03-28T12:00");
        assert_eq!(
            daily.next_slot(&berlin, before),
            Some(slot(&berlin, "2026-03-30T02:30")),
            "the 29th is skipped"
        );
        // 2026-10-25: 03:00 → 02:00. "30 2 * * *" fires at the first 02:30 only.
        let first = slot(&berlin, "2026-10-25T02:30");
        assert_eq!(
            daily.next_slot(&berlin, slot(&berlin, "2026-10-24T12:00")),
            Some(first)
        );
        assert_eq!(
            daily.next_slot(&berlin, first),
            Some(slot(&berlin, "2026-10-26T02:30")),
            "not again an hour later"
        );
        // And from inside the repeated hour, the newest slot is that first 02:30.
        let second_pass = first + jiff::Span::new().hours(1);
        assert_eq!(daily.latest_slot(&berlin, second_pass), Some(first));
        // Hourly across the fall: 02:00 once, then 03:00.
        let hourly = cron("0 * * * *");
        let two = slot(&berlin, "2026-10-25T02:00");
        assert_eq!(
            hourly.next_slot(&berlin, two).map(|t| t.to_string()),
            Some(slot(&berlin, "2026-10-25T03:00").to_string())
        );
    }

    #[test]
    fn the_latest_slot_is_at_or_before_now_and_the_next_after_it() {
        let utc = TimeZone::UTC;
        let now: Timestamp = "2026-12-03T15:42:10Z".parse().unwrap();
        let hourly = cron("@hourly");
        assert_eq!(
            hourly.latest_slot(&utc, now).unwrap().to_string(),
            "2026-12-03T15:00:00Z"
        );
        assert_eq!(
            hourly.next_slot(&utc, now).unwrap().to_string(),
            "2026-12-03T16:00:00Z"
        );
        let exact: Timestamp = "2026-12-03T16:00:00Z".parse().unwrap();
        assert_eq!(hourly.latest_slot(&utc, exact), Some(exact));
        assert_eq!(
            slot_key("vault-rebuild", exact),
            "schedule:vault-rebuild:2026-12-03T16:00:00Z"
        );
    }

    #[test]
    fn names_are_short_lowercase_words() {
        for ok in ["vault-rebuild", "listings-fetch", "a", "nightly_2"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-x", "Vault", "a b", &"x".repeat(65), "ünï"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
