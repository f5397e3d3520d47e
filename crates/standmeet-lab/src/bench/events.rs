//! Events and webhooks.
//!
//! (a) What recording an event adds to the operation that records it (target ≤ 10 %):
//! the time of a visitor's access request (`access_requests::submit`: its row, its
//! mail job, its event, one commit) beside what the event adds to the statement that
//! carries it (the event's insert, and with an endpoint the delivery row and its job),
//! with no endpoint and with one that wants every event.
//!
//! (b) Deliveries at 1,000 events/s to one endpoint on loopback (an HTTP receiver in
//! this process) for a while: how many arrived, the lag from the event's commit to its
//! arrival (p50, p99, worst), and how long after the last event the last delivery
//! came. "Not falling behind": the lag stays flat and the tail is short.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::json;
use sqlx::PgPool;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{ms, percentile};
use standmeet::config::Settings;
use standmeet::domain::access_requests::{self, NewRequest};
use standmeet::domain::events::{self, EventType, NewEvent};
use standmeet::domain::webhooks::{self, DeliverWebhook};
use standmeet::types::EmailAddress;
use standmeet_jobs::{EngineConfig, JobClient, JobRuntime, QueueConfig, Registry};

/// What the receiver saw: for each delivery, how long after its event it arrived.
#[derive(Default)]
struct Arrivals {
    lags: Vec<Duration>,
    last_at: Option<Instant>,
}

pub async fn measure(pool: &PgPool, quick: bool) -> anyhow::Result<()> {
    let operations = if quick { 200 } else { 2_000 };
    let seconds = if quick { 2 } else { 10 };
    let rate = 1_000;

    let (url, arrivals) = start_receiver().await?;

    eprintln!(
        "bench: events: (a) {operations} access requests and {operations} events, no endpoint"
    );
    let op_none = per_submit(pool, operations).await?;
    let event_none = per_event(pool, operations).await?;
    let endpoint = webhooks::create(pool, &url, &["*".to_string()], true).await?;
    eprintln!("bench: events: (a) the same with one endpoint for every event");
    let op_one = per_submit(pool, operations).await?;
    let event_one = per_event(pool, operations).await?;
    // What (a) left behind: requests, their events and deliveries, and jobs nobody ran.
    sqlx::query("TRUNCATE access_requests, events, webhook_deliveries, jobs CASCADE")
        .execute(pool)
        .await?;

    let settings = Settings::from_lookup(|name| {
        (name == "STANDMEET_FETCH_ALLOW_PRIVATE").then(|| "true".to_string())
    })?;
    let mut runs = Vec::new();
    for per_tx in [1, 10] {
        eprintln!(
            "bench: events: (b) {rate} events/s for {seconds} s to one loopback endpoint, {per_tx} a transaction"
        );
        runs.push(deliver_at(pool, &settings, &arrivals, rate, seconds, per_tx).await?);
    }
    webhooks::delete(pool, endpoint.endpoint.id).await?;

    let overhead_none =
        event_none.as_secs_f64() / (op_none - event_none.min(op_none)).as_secs_f64();
    let overhead_one = event_one.as_secs_f64() / (op_one - event_one.min(op_one)).as_secs_f64();
    println!();
    println!("events and webhooks");
    println!("{:<62} {:>12} {:>10}", "measure", "value", "target");
    let row = |measure: &str, value: String, target: &str| {
        println!("{measure:<62} {value:>12} {target:>10}")
    };
    row(
        "(a) access request, no endpoint (ms each)",
        format!("{:.3}", ms(op_none)),
        "",
    );
    row(
        "(a) what its event adds, no endpoint (ms each)",
        format!("{:.3}", ms(event_none)),
        "",
    );
    row(
        "(a) the event's share of the rest of the operation",
        format!("{:.1} %", overhead_none * 100.0),
        "≤ 10 %",
    );
    row(
        "(a) access request, one endpoint (ms each)",
        format!("{:.3}", ms(op_one)),
        "",
    );
    row(
        "(a) what its event and delivery add, one endpoint (ms each)",
        format!("{:.3}", ms(event_one)),
        "",
    );
    row(
        "(a) their share of the rest of the operation",
        format!("{:.1} %", overhead_one * 100.0),
        "",
    );
    for run in &runs {
        let label = |what: &str| format!("(b) {} a transaction: {what}", run.per_tx);
        row(
            &label("events/s offered"),
            format!("{:.0}", run.offered_per_s),
            "1000",
        );
        row(
            &label("delivered"),
            format!("{} of {}", run.delivered, run.offered),
            "all",
        );
        row(
            &label("commit → received p50 (ms)"),
            format!("{:.1}", ms(run.p50)),
            "",
        );
        row(
            &label("commit → received p99 (ms)"),
            format!("{:.1}", ms(run.p99)),
            "",
        );
        row(
            &label("commit → received, worst (ms)"),
            format!("{:.1}", ms(run.worst)),
            "",
        );
        row(
            &label("last delivery after the last event (ms)"),
            format!("{:.0}", ms(run.tail)),
            "",
        );
    }
    println!(
        "{}",
        json!({
            "subject": "events",
            "quick": quick,
            "submit_ms": ms(op_none),
            "event_ms": ms(event_none),
            "event_overhead": overhead_none,
            "submit_one_endpoint_ms": ms(op_one),
            "event_one_endpoint_ms": ms(event_one),
            "event_one_endpoint_overhead": overhead_one,
            "deliveries": runs.iter().map(|run| json!({
                "events_per_transaction": run.per_tx,
                "offered_per_s": run.offered_per_s,
                "offered": run.offered,
                "delivered": run.delivered,
                "lag_p50_ms": ms(run.p50),
                "lag_p99_ms": ms(run.p99),
                "lag_max_ms": ms(run.worst),
                "tail_ms": ms(run.tail),
            })).collect::<Vec<_>>(),
        })
    );
    for run in &runs {
        anyhow::ensure!(
            run.delivered as u64 == run.offered,
            "only {} of {} events were delivered within a minute",
            run.delivered,
            run.offered
        );
    }
    Ok(())
}

/// One run of (b).
struct DeliveryRun {
    per_tx: u64,
    offered: u64,
    offered_per_s: f64,
    delivered: usize,
    p50: Duration,
    p99: Duration,
    worst: Duration,
    tail: Duration,
}

/// Starts the engine with the `webhooks` queue (on connections of its own, as `standmeet
/// serve` runs it), records `rate` events a second for `seconds`, `per_tx` to a
/// transaction, and waits up to a minute for their deliveries.
async fn deliver_at(
    pool: &PgPool,
    settings: &Settings,
    arrivals: &Arc<Mutex<Arrivals>>,
    rate: u64,
    seconds: u64,
    per_tx: u64,
) -> anyhow::Result<DeliveryRun> {
    *arrivals.lock().expect("not poisoned") = Arrivals::default();
    let registry = Registry::new().register(DeliverWebhook::new(settings)?);
    let mut config = settings.engine_config(&registry);
    config.queues = vec![webhooks_queue(&config)];
    let engine_pool = standmeet::db::engine_pool(pool, config.connections_needed());
    let jobs = JobClient::new(pool.clone(), 64);
    let running = JobRuntime::start(&engine_pool, registry, config, &jobs).await?;
    let produced = produce(pool, rate, seconds, per_tx).await;
    let stopped_at = Instant::now();
    if let Ok((offered, _)) = produced {
        let deadline = Instant::now() + Duration::from_secs(60);
        while arrivals.lock().expect("not poisoned").lags.len() < offered as usize
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    running.shutdown().await;
    engine_pool.close().await;
    let (offered, took) = produced?;
    let (mut lags, last_at) = {
        let arrivals = arrivals.lock().expect("not poisoned");
        (arrivals.lags.clone(), arrivals.last_at)
    };
    let delivered = lags.len();
    let (p50, p99, worst) = if lags.is_empty() {
        (Duration::ZERO, Duration::ZERO, Duration::ZERO)
    } else {
        (
            percentile(&mut lags, 0.50),
            percentile(&mut lags, 0.99),
            percentile(&mut lags, 1.0),
        )
    };
    Ok(DeliveryRun {
        per_tx,
        offered,
        offered_per_s: offered as f64 / took.as_secs_f64(),
        delivered,
        p50,
        p99,
        worst,
        tail: last_at
            .map(|at| at.saturating_duration_since(stopped_at))
            .unwrap_or_default(),
    })
}

/// The standard `webhooks` queue of `config`.
fn webhooks_queue(config: &EngineConfig) -> QueueConfig {
    config
        .queues
        .iter()
        .find(|queue| queue.name == "webhooks")
        .cloned()
        .expect("the standard queues include webhooks")
}

/// The mean time of one access request, sent one after another.
async fn per_submit(pool: &PgPool, count: usize) -> anyhow::Result<Duration> {
    let jobs = JobClient::new(pool.clone(), 1);
    let started = Instant::now();
    for n in 0..count {
        let request = NewRequest {
            name: "Bench".into(),
            email: EmailAddress::parse(&format!("bench{n}@example.com"))?,
            message: String::new(),
        };
        access_requests::submit(pool, &jobs, &request).await?;
    }
    Ok(started.elapsed() / count as u32)
}

/// What recording one event adds to the statement that carries it, inside an open
/// transaction (rolled back): the mean time of `SELECT record_event(…)` less that of a
/// `SELECT` of the same parameters, which costs the same round trip and does nothing
/// (an access request calls `record_event` inside a statement it sends anyway). The two
/// alternate, so that a change in the machine's load falls on both.
async fn per_event(pool: &PgPool, count: usize) -> anyhow::Result<Duration> {
    let mut tx = pool.begin().await?;
    let (mut with_event, mut without) = (Duration::ZERO, Duration::ZERO);
    for n in 0..count {
        let event = NewEvent::access_request(
            EventType::AccessRequestCreated,
            n as i64,
            "bench@example.com",
        );
        let started = Instant::now();
        sqlx::query("SELECT record_event($1, $2, $3)")
            .bind(event.event_type.as_str())
            .bind(event.subject_id)
            .bind(&event.data)
            .execute(&mut *tx)
            .await?;
        with_event += started.elapsed();
        let started = Instant::now();
        sqlx::query("SELECT $1::text, $2::bigint, $3::jsonb")
            .bind(event.event_type.as_str())
            .bind(event.subject_id)
            .bind(&event.data)
            .execute(&mut *tx)
            .await?;
        without += started.elapsed();
    }
    tx.rollback().await?;
    Ok(with_event.saturating_sub(without) / count as u32)
}

/// Records `rate` events a second for `seconds`, `per_tx` to a transaction, from forty
/// producers on a fixed schedule (catching up when they fall behind, so the rate
/// achieved shows whether the database kept up); answers how many and how long it took.
async fn produce(
    pool: &PgPool,
    rate: u64,
    seconds: u64,
    per_tx: u64,
) -> anyhow::Result<(u64, Duration)> {
    const PRODUCERS: u64 = 40;
    let transactions = rate * seconds / PRODUCERS / per_tx;
    let period = Duration::from_secs_f64((PRODUCERS * per_tx) as f64 / rate as f64);
    let started = Instant::now();
    let mut producers = tokio::task::JoinSet::new();
    for producer in 0..PRODUCERS {
        let pool = pool.clone();
        producers.spawn(async move {
            let mut clock = tokio::time::interval(period);
            clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            for n in 0..transactions {
                clock.tick().await;
                let mut tx = pool.begin().await?;
                for k in 0..per_tx {
                    let subject = ((producer * transactions + n) * per_tx + k) as i64;
                    let event = NewEvent::access_request(
                        EventType::AccessRequestCreated,
                        subject,
                        "bench@example.com",
                    );
                    events::record(&mut tx, &event).await?;
                }
                tx.commit().await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = producers.join_next().await {
        done??;
    }
    Ok((transactions * PRODUCERS * per_tx, started.elapsed()))
}

/// An HTTP receiver on loopback that answers 200 and notes each delivery's lag.
async fn start_receiver() -> anyhow::Result<(String, Arc<Mutex<Arrivals>>)> {
    let arrivals = Arc::new(Mutex::new(Arrivals::default()));
    let app = Router::new().fallback(receive).with_state(arrivals.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((format!("http://{address}/bench"), arrivals))
}

async fn receive(State(arrivals): State<Arc<Mutex<Arrivals>>>, body: Bytes) -> StatusCode {
    let now = OffsetDateTime::now_utc();
    let occurred = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|message| {
            message["occurred_at"]
                .as_str()
                .and_then(|at| OffsetDateTime::parse(at, &Rfc3339).ok())
        });
    let lag = occurred
        .map(|at| (now - at).try_into().unwrap_or(Duration::ZERO))
        .unwrap_or(Duration::ZERO);
    let mut arrivals = arrivals.lock().expect("not poisoned");
    arrivals.lags.push(lag);
    arrivals.last_at = Some(Instant::now());
    StatusCode::OK
}
