//! Periodic jobs on a real database: one job per slot however many copies fire at
//! once, missed slots made up once, the hour that clocks repeat fired once, "Run now",
//! and changes that are refused writing nothing.

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::json;
use sqlx::PgPool;
use standmeet_jobs::Registry;
use standmeet_jobs::builtin::Noop;
use standmeet_jobs::periodic::ScheduleChange;
use standmeet_jobs::testing::fire_due;
use standmeet_jobs::{Error, JobClient};

fn registry() -> Registry {
    Registry::new().register(Noop)
}

/// A client over the test's database, as the application's state holds one.
fn jobs(pool: &PgPool) -> JobClient {
    JobClient::new(pool.clone(), 8)
}

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

async fn hourly(pool: &PgPool, name: &str) {
    let change = ScheduleChange {
        name: name.into(),
        cron: Some("0 * * * *".into()),
        kind: Some("system.noop".into()),
        args: Some(json!({ "from": name })),
        ..Default::default()
    };
    jobs(pool)
        .set_schedule(&registry(), &TimeZone::UTC, change)
        .await
        .unwrap();
}

/// Pretends the schedule was last accounted for at `through`.
async fn fired_through(pool: &PgPool, name: &str, through: Timestamp) {
    sqlx::query("UPDATE job_schedules SET fired_through = $2::timestamptz WHERE name = $1")
        .bind(name)
        .bind(through.to_string())
        .execute(pool)
        .await
        .unwrap();
}

async fn keys(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar("SELECT unique_key FROM jobs WHERE unique_key IS NOT NULL ORDER BY id")
        .fetch_all(pool)
        .await
        .unwrap()
}

#[sqlx::test]
async fn copies_firing_at_once_insert_one_job_per_slot(pool: PgPool) {
    hourly(&pool, "tick").await;
    fired_through(&pool, "tick", at("2026-12-03T09:30:00Z")).await;
    let now = at("2026-12-03T10:00:05Z");
    let copies = (0..6).map(|_| {
        let pool = pool.clone();
        tokio::spawn(async move {
            fire_due(&pool, &registry(), &TimeZone::UTC, now)
                .await
                .unwrap()
        })
    });
    let mut fired = 0;
    for copy in copies {
        fired += copy.await.unwrap().len();
    }
    assert_eq!(fired, 1, "one copy fired it");
    assert_eq!(keys(&pool).await, ["schedule:tick:2026-12-03T10:00:00Z"]);
    // A later look within the same hour fires nothing; the next hour fires again.
    assert!(
        fire_due(
            &pool,
            &registry(),
            &TimeZone::UTC,
            at("2026-12-03T10:40:00Z")
        )
        .await
        .unwrap()
        .is_empty()
    );
    fire_due(
        &pool,
        &registry(),
        &TimeZone::UTC,
        at("2026-12-03T11:00:00Z"),
    )
    .await
    .unwrap();
    assert_eq!(keys(&pool).await.len(), 2);
}

#[sqlx::test]
async fn slots_missed_while_nothing_ran_are_made_up_once(pool: PgPool) {
    hourly(&pool, "tick").await;
    // Nothing ran for five hours and a half.
    fired_through(&pool, "tick", at("2026-12-03T04:30:00Z")).await;
    let start = at("2026-12-03T10:00:30Z");
    let fired = fire_due(&pool, &registry(), &TimeZone::UTC, start)
        .await
        .unwrap();
    assert_eq!(fired.len(), 1);
    assert_eq!(keys(&pool).await, ["schedule:tick:2026-12-03T10:00:00Z"]);
    let job: serde_json::Value = sqlx::query_scalar("SELECT args FROM jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(job, json!({ "from": "tick" }));
}

#[sqlx::test]
async fn a_new_schedule_starts_from_now_and_a_disabled_one_never_fires(pool: PgPool) {
    hourly(&pool, "tick").await;
    // Created just now: the slot an hour ago is not owed.
    let now = Timestamp::now();
    assert!(
        fire_due(&pool, &registry(), &TimeZone::UTC, now)
            .await
            .unwrap()
            .is_empty()
    );
    let off = ScheduleChange {
        name: "tick".into(),
        enabled: Some(false),
        ..Default::default()
    };
    let schedule = jobs(&pool)
        .set_schedule(&registry(), &TimeZone::UTC, off)
        .await
        .unwrap();
    assert!(!schedule.enabled);
    assert_eq!(schedule.next_run_at, None);
    let later = now + jiff::Span::new().hours(3);
    assert!(
        fire_due(&pool, &registry(), &TimeZone::UTC, later)
            .await
            .unwrap()
            .is_empty()
    );
}

#[sqlx::test]
async fn the_hour_clocks_repeat_in_autumn_fires_once(pool: PgPool) {
    let berlin = TimeZone::get("Europe/Berlin").unwrap();
    hourly(&pool, "tick").await;
    // Berlin, 2026-10-25: 03:00 CEST (01:00Z) goes back to 02:00 CET.
    fired_through(&pool, "tick", at("2026-10-24T21:30:00Z")).await;
    let mut now = at("2026-10-24T21:35:00Z");
    while now < at("2026-10-25T04:10:00Z") {
        fire_due(&pool, &registry(), &berlin, now).await.unwrap();
        now += jiff::Span::new().minutes(5);
    }
    assert_eq!(
        keys(&pool).await,
        [
            "schedule:tick:2026-10-24T22:00:00Z", // 00:00 CEST
            "schedule:tick:2026-10-24T23:00:00Z", // 01:00 CEST
            "schedule:tick:2026-10-25T00:00:00Z", // 02:00 CEST, the first 02:00
            // 01:00Z is 02:00 CET, the same local hour again: no firing.
            "schedule:tick:2026-10-25T02:00:00Z", // 03:00 CET
            "schedule:tick:2026-10-25T03:00:00Z", // 04:00 CET
            "schedule:tick:2026-10-25T04:00:00Z", // 05:00 CET
        ]
    );
}

#[sqlx::test]
async fn run_now_inserts_a_job_unless_the_schedules_job_is_pending(pool: PgPool) {
    hourly(&pool, "tick").await;
    let first = jobs(&pool)
        .run_schedule_now(&registry(), "tick")
        .await
        .unwrap();
    assert!(!first.duplicate);
    let again = jobs(&pool)
        .run_schedule_now(&registry(), "tick")
        .await
        .unwrap();
    assert_eq!(
        (again.id, again.duplicate),
        (first.id, true),
        "already queued"
    );
    let listed = jobs(&pool).schedule(&TimeZone::UTC, "tick").await.unwrap();
    let last = listed.last_run.expect("a last run");
    assert_eq!(last.job_id, first.id);
    // Once it finished, Run now inserts a new one.
    sqlx::query("UPDATE jobs SET state = 'completed' WHERE id = $1")
        .bind(first.id.0)
        .execute(&pool)
        .await
        .unwrap();
    let third = jobs(&pool)
        .run_schedule_now(&registry(), "tick")
        .await
        .unwrap();
    assert!(!third.duplicate);
    assert!(matches!(
        jobs(&pool).run_schedule_now(&registry(), "nope").await,
        Err(Error::NotFound(_))
    ));
}

#[sqlx::test]
async fn a_bad_change_is_refused_with_words_and_writes_nothing(pool: PgPool) {
    hourly(&pool, "tick").await;
    let before = jobs(&pool).schedules(&TimeZone::UTC).await.unwrap();
    let refused = [
        (
            ScheduleChange {
                name: "tick".into(),
                cron: Some("0 * * *".into()),
                ..Default::default()
            },
            "it has 4 fields",
        ),
        (
            ScheduleChange {
                name: "tick".into(),
                cron: Some("5".repeat(5_000)),
                ..Default::default()
            },
            "at most 200",
        ),
        (
            ScheduleChange {
                name: "tick".into(),
                kind: Some("nobody.runs_this".into()),
                ..Default::default()
            },
            "No StandMeet process runs jobs of kind \"nobody.runs_this\"",
        ),
        (
            ScheduleChange {
                name: "tick".into(),
                args: Some(json!([1, 2])),
                ..Default::default()
            },
            "Args must be a JSON object",
        ),
        (
            ScheduleChange {
                name: "tick".into(),
                args: Some(json!({ "text": "a\u{0}b" })),
                ..Default::default()
            },
            "NUL",
        ),
        (
            ScheduleChange {
                name: "tick".into(),
                queue: Some("q\u{0}".into()),
                ..Default::default()
            },
            "control character",
        ),
        (
            ScheduleChange {
                name: "Bad Name".into(),
                cron: Some("@daily".into()),
                kind: Some("system.noop".into()),
                ..Default::default()
            },
            "A schedule's name",
        ),
        (
            ScheduleChange {
                name: "new-one".into(),
                kind: Some("system.noop".into()),
                ..Default::default()
            },
            "needs a cron expression",
        ),
    ];
    for (change, words) in refused {
        let err = jobs(&pool)
            .set_schedule(&registry(), &TimeZone::UTC, change)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(words), "{err}");
    }
    assert_eq!(jobs(&pool).schedules(&TimeZone::UTC).await.unwrap(), before);
}

#[sqlx::test]
async fn an_operators_job_on_a_slots_key_keeps_the_slot_to_one_job(pool: PgPool) {
    hourly(&pool, "tick").await;
    fired_through(&pool, "tick", at("2026-12-03T09:30:00Z")).await;
    // Someone inserted the 10:00 slot's job by hand before the schedule fired it.
    let mut conn = pool.acquire().await.unwrap();
    let by_hand = jobs(&pool)
        .insert_unique_tx::<Noop>(
            &mut conn,
            &json!({}),
            "schedule:tick:2026-12-03T10:00:00Z",
            Default::default(),
        )
        .await
        .unwrap();
    let fired = fire_due(
        &pool,
        &registry(),
        &TimeZone::UTC,
        at("2026-12-03T10:00:01Z"),
    )
    .await
    .unwrap();
    assert_eq!(fired.len(), 1);
    assert_eq!((fired[0].1.id, fired[0].1.duplicate), (by_hand.id, true));
    assert_eq!(keys(&pool).await.len(), 1);
}

#[sqlx::test]
async fn a_name_no_schedule_can_have_is_not_found_not_a_failure(pool: PgPool) {
    for name in ["with\0nul", "", &"x".repeat(5_000), "Upper Case"] {
        assert!(
            matches!(
                jobs(&pool).run_schedule_now(&registry(), name).await,
                Err(Error::NotFound(_))
            ),
            "{name:?}"
        );
        assert!(matches!(
            jobs(&pool).schedule(&TimeZone::UTC, name).await,
            Err(Error::NotFound(_))
        ));
    }
}
