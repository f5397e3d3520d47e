//! receiver-down: a webhook receiver answers nothing (its connections hang) for ten
//! minutes of the circuit's time, then comes back; another receiver is up all along.
//!
//! The webhook deliverer runs in this process on the `webhooks` queue as `serve` has it
//! (32 workers), with the backoff unit at 20 ms (`STANDMEET_RETRY_BASE_MS`; 1/50 of the
//! default 1 s, so the 12 s of the outage are ten minutes at the default's scale) and a
//! 500 ms delivery timeout. Two endpoints for every event, each at a receiver of the
//! harness: `down`, whose connections hang during the outage, and `up`, which answers
//! 200 at once. Events are recorded as the features record them (`events::record`) at
//! 20 a second through the outage and for 2 s after it.
//!
//! Promises: every event reaches both endpoints (a 2xx from each), each under its one
//! `webhook-id` (`evt_<event id>`, the same on every try); the `up` endpoint is not held
//! up by the other (each event reaches it within 2 s); the `down` endpoint's circuit
//! opened, and fewer attempts than events were spent on it during the outage.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;

use super::{Lab, Outcome};
use standmeet::config::Settings;
use standmeet::domain::events::{self, EventType, NewEvent};
use standmeet::domain::webhooks::{self, DeliverWebhook};
use standmeet_jobs::{JobClient, JobRuntime, Registry};

const OUTAGE: Duration = Duration::from_secs(12);
const AFTER_OUTAGE: Duration = Duration::from_secs(2);
const EVENTS_PER_SECOND: u64 = 20;
const UP_WITHIN: Duration = Duration::from_secs(2);

/// What a receiver saw.
#[derive(Default)]
struct Seen {
    /// Every request: its `webhook-id`, and whether it was answered 2xx.
    requests: Vec<(String, bool)>,
    /// When each `webhook-id` first got a 2xx.
    delivered_at: HashMap<String, Instant>,
    in_flight: usize,
    most_in_flight: usize,
}

struct Receiver {
    down: AtomicBool,
    seen: Mutex<Seen>,
}

/// A request being answered; counted out when dropped (answered, or given up on).
struct Answering(Arc<Receiver>);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.seen.lock().expect("not poisoned").in_flight -= 1;
    }
}

async fn answer(State(receiver): State<Arc<Receiver>>, request: Request) -> StatusCode {
    let id = request
        .headers()
        .get("webhook-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let _answering = {
        let mut seen = receiver.seen.lock().expect("not poisoned");
        seen.in_flight += 1;
        seen.most_in_flight = seen.most_in_flight.max(seen.in_flight);
        Answering(receiver.clone())
    };
    if receiver.down.load(Ordering::SeqCst) {
        receiver
            .seen
            .lock()
            .expect("not poisoned")
            .requests
            .push((id.clone(), false));
        // No answer at all: the deliverer gives up after its timeout.
        std::future::pending::<()>().await;
    }
    let mut seen = receiver.seen.lock().expect("not poisoned");
    seen.requests.push((id.clone(), true));
    seen.delivered_at.entry(id).or_insert_with(Instant::now);
    StatusCode::OK
}

async fn start_receiver(down: bool) -> anyhow::Result<(String, Arc<Receiver>)> {
    let receiver = Arc::new(Receiver {
        down: AtomicBool::new(down),
        seen: Mutex::default(),
    });
    let app = Router::new().fallback(answer).with_state(receiver.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((format!("http://{address}/hook"), receiver))
}

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    let (_, pool) = lab.fresh_database("chaos_receiver_down").await?;
    let (down_url, down) = start_receiver(true).await?;
    let (up_url, up) = start_receiver(false).await?;
    let every = ["*".to_string()];
    let down_endpoint = webhooks::create(&pool, &down_url, &every, true).await?;
    webhooks::create(&pool, &up_url, &every, true).await?;

    let settings = Settings::from_lookup(|name| match name {
        "STANDMEET_FETCH_ALLOW_PRIVATE" => Some("true".to_string()),
        "STANDMEET_RETRY_BASE_MS" => Some("20".to_string()),
        "STANDMEET_WEBHOOK_TIMEOUT_MS" => Some("500".to_string()),
        _ => None,
    })?;
    let registry = Registry::new().register(DeliverWebhook::new(&settings)?);
    let mut config = settings.engine_config(&registry);
    config.queues.retain(|queue| queue.name == "webhooks");
    let engine_pool = standmeet::db::engine_pool(&pool, config.connections_needed());
    let jobs = JobClient::new(pool.clone(), 64);
    let running = JobRuntime::start(&engine_pool, registry, config, &jobs).await?;

    // Events at a steady pace through the outage and after it.
    let began = Instant::now();
    let mut recorded: HashMap<String, Instant> = HashMap::new();
    let mut ticker = tokio::time::interval(Duration::from_millis(1_000 / EVENTS_PER_SECOND));
    let mut circuit_opened = false;
    let mut n = 0;
    while began.elapsed() < OUTAGE + AFTER_OUTAGE {
        ticker.tick().await;
        if began.elapsed() >= OUTAGE && down.down.swap(false, Ordering::SeqCst) {
            eprintln!("chaos: receiver-down: the receiver is back");
        }
        n += 1;
        let mut tx = pool.begin().await?;
        let id = events::record(
            &mut tx,
            &NewEvent::access_request(EventType::AccessRequestCreated, n, "ada@example.com"),
        )
        .await?;
        tx.commit().await?;
        recorded.insert(format!("evt_{id}"), Instant::now());
        if !circuit_opened && began.elapsed() < OUTAGE {
            circuit_opened = webhooks::circuit::circuit(&pool, down_endpoint.endpoint.id)
                .await?
                .is_some_and(|circuit| circuit.open_until.is_some());
        }
    }
    let attempts_in_outage = down
        .seen
        .lock()
        .expect("not poisoned")
        .requests
        .iter()
        .filter(|(_, answered)| !answered)
        .count();

    // Everything reaches both, in the end.
    let deadline = Instant::now() + lab.sizes.settle_limit;
    let all_delivered = |receiver: &Receiver| {
        let seen = receiver.seen.lock().expect("not poisoned");
        recorded.keys().all(|id| seen.delivered_at.contains_key(id))
    };
    while !(all_delivered(&down) && all_delivered(&up)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.shutdown().await;
    engine_pool.close().await;

    let count_delivered = |receiver: &Receiver| {
        let seen = receiver.seen.lock().expect("not poisoned");
        recorded
            .keys()
            .filter(|id| seen.delivered_at.contains_key(*id))
            .count()
    };
    let strangers = |receiver: &Receiver| {
        let seen = receiver.seen.lock().expect("not poisoned");
        let ids: HashSet<&String> = seen.requests.iter().map(|(id, _)| id).collect();
        ids.iter().filter(|id| !recorded.contains_key(**id)).count()
    };
    let mut up_lags: Vec<Duration> = {
        let seen = up.seen.lock().expect("not poisoned");
        recorded
            .iter()
            .filter_map(|(id, at)| seen.delivered_at.get(id).map(|got| *got - *at))
            .collect()
    };
    up_lags.sort();
    let up_worst = up_lags.last().copied().unwrap_or_default();
    let up_p99 = up_lags
        .get((up_lags.len() * 99 / 100).min(up_lags.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default();
    let events_in_outage = recorded.len() as u64 * OUTAGE.as_millis() as u64
        / (OUTAGE + AFTER_OUTAGE).as_millis() as u64;
    let most_in_flight = down.seen.lock().expect("not poisoned").most_in_flight;
    pool.close().await;

    let mut outcome = Outcome::default();
    outcome.figure("events", recorded.len());
    outcome.figure("down_delivered", count_delivered(&down));
    outcome.figure("up_delivered", count_delivered(&up));
    outcome.figure("up_p99_ms", up_p99.as_millis() as u64);
    outcome.figure("up_worst_ms", up_worst.as_millis() as u64);
    outcome.figure("circuit_opened", circuit_opened);
    outcome.figure("attempts_in_outage", attempts_in_outage);
    outcome.figure("most_in_flight", most_in_flight);
    let (down_strangers, up_strangers) = (strangers(&down), strangers(&up));
    outcome.check(
        count_delivered(&down) == recorded.len() && count_delivered(&up) == recorded.len(),
        format!(
            "not every event reached both endpoints: {} and {} of {}",
            count_delivered(&down),
            count_delivered(&up),
            recorded.len()
        ),
    );
    outcome.check(
        down_strangers == 0 && up_strangers == 0,
        format!("{down_strangers} and {up_strangers} webhook-ids that name no event"),
    );
    outcome.check(
        up_worst <= UP_WITHIN,
        format!(
            "the endpoint that was up waited behind the other: an event reached it after {} ms",
            up_worst.as_millis()
        ),
    );
    outcome.check(circuit_opened, "the down endpoint's circuit never opened");
    outcome.check(
        (attempts_in_outage as u64) < events_in_outage,
        format!(
            "{attempts_in_outage} attempts were spent on the down endpoint for {events_in_outage} events during the outage"
        ),
    );
    Ok(outcome)
}
