//! Job listings: sources and their checks, fetching real HTTP from boards on loopback,
//! deduplication within and across boards, what failures do, and the receipt that
//! `jobs.fetch_result` redeems in the same shape as a fetch that finished in time.

use crate::common;

use std::time::Duration;

use axum::http::StatusCode;
use common::boards::BoardServer;
use common::jobs::wait_for_state;
use common::mcp::{TOKEN, structured};
use common::{TestApp, TestAppBuilder};
use serde_json::{Value, json};
use sqlx::PgPool;
use standmeet::domain::listings::{self, ListingsError};
use standmeet::model::FetchAnswer;
use standmeet::state::AppState;
use standmeet_jobs::{JobId, JobState};

/// The app with the MCP token set and fetches waiting up to `fetch_wait_ms`.
fn fetch_desk(pool: &PgPool, fetch_wait_ms: &str) -> TestAppBuilder {
    TestApp::builder(pool.clone())
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .setting("STANDMEET_FETCH_WAIT_MS", fetch_wait_ms)
}

/// [`fetch_desk`] with job boards on loopback and the job engine.
async fn fetching_app(pool: &PgPool, fetch_wait_ms: &str) -> TestApp {
    fetch_desk(pool, fetch_wait_ms)
        .boards()
        .jobs()
        .spawn()
        .await
}

/// The four sample boards as sources; answers their ids (greenhouse, lever, rss, atom).
async fn add_samples(pool: &PgPool, boards: &BoardServer) -> [i64; 4] {
    let mut ids = [0; 4];
    for (slot, (name, kind, path)) in [
        ("Acme", "greenhouse", "/greenhouse/acme"),
        ("Globex", "lever", "/lever/globex"),
        ("Rust Jobs Weekly", "rss", "/feeds/rust.rss"),
        ("Hooli", "rss", "/feeds/hooli.atom"),
    ]
    .into_iter()
    .enumerate()
    {
        ids[slot] = listings::add_source(pool, name, kind, &boards.url(path), true)
            .await
            .unwrap();
    }
    ids
}

async fn fetch_new(state: &AppState, limit: Duration) -> Result<FetchAnswer, ListingsError> {
    listings::fetch_new(&state.pool, &state.jobs, limit, None).await
}

fn titles(answer: &FetchAnswer) -> Vec<String> {
    let mut titles: Vec<String> = answer
        .listings
        .as_ref()
        .expect("a finished answer")
        .iter()
        .map(|listing| listing.title.clone())
        .collect();
    titles.sort();
    titles
}

#[sqlx::test(migrations = false)]
async fn one_fetch_per_board_finds_every_listing_once_across_boards(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = fetching_app(&pool, "20000").await;
    let boards = app.boards();
    let [greenhouse, ..] = add_samples(&pool, boards).await;

    let answer = fetch_new(&app.state, Duration::from_secs(20))
        .await
        .unwrap();
    assert!(!answer.pending);
    assert_eq!(answer.job_ids.len(), 4, "one job per enabled source");
    assert_eq!(answer.errors.as_deref(), Some(&[][..]));
    // 3 + 2 + 2 + 2 postings, one of them on two boards (Greenhouse and the RSS feed,
    // with tracking parameters, http and a trailing slash in the feed's link).
    assert_eq!(
        titles(&answer),
        [
            "Backend Engineer (Rust)",
            "Data Engineer",
            "Embedded Rust Developer at Initech",
            "Frontend Engineer",
            "Product Designer",
            "Security Engineer",
            "Site Reliability Engineer",
            "Staff Engineer, Search",
        ]
    );
    let listings = answer.listings.as_ref().unwrap();
    assert!(listings.iter().all(|listing| listing.new));
    let backend = listings
        .iter()
        .find(|l| l.title == "Backend Engineer (Rust)")
        .unwrap();
    assert_eq!(backend.source_id, greenhouse);
    assert_eq!(backend.external_id, "4001");
    assert_eq!(backend.company.as_deref(), Some("Acme Robotics"));
    assert_eq!(backend.location.as_deref(), Some("Berlin, Germany"));
    assert_eq!(backend.url, "https://boards.greenhouse.io/acme/jobs/4001");
    assert_eq!(backend.posted_at.as_deref(), Some("2026-11-20T15:00:00Z"));
    // A Lever posting carries no company: the source's name stands in.
    let data = listings
        .iter()
        .find(|l| l.title == "Data Engineer")
        .unwrap();
    assert_eq!(data.company.as_deref(), Some("Globex"));

    assert_eq!(
        common::count(&pool, "SELECT count(*) FROM listings").await,
        8
    );
    assert_eq!(
        common::count(&pool, "SELECT count(*) FROM listing_sightings").await,
        9,
        "the posting on two boards is one listing seen twice"
    );
    for path in [
        "/greenhouse/acme",
        "/lever/globex",
        "/feeds/rust.rss",
        "/feeds/hooli.atom",
    ] {
        assert_eq!(boards.hits(path), 1, "{path}");
    }
}

#[sqlx::test(migrations = false)]
async fn a_second_fetch_updates_in_place_and_marks_nothing_new(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = fetching_app(&pool, "20000").await;
    let boards = app.boards();
    add_samples(&pool, boards).await;
    let first = fetch_new(&app.state, Duration::from_secs(20))
        .await
        .unwrap();

    // The board renamed a posting meanwhile.
    let renamed = include_str!("../fixtures/boards/greenhouse.json")
        .replace("Product Designer", "Senior Product Designer");
    boards.serve("/greenhouse/acme", "application/json", renamed);
    let second = fetch_new(&app.state, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(second.new_count(), 0);
    let ids = |answer: &FetchAnswer| {
        let mut ids: Vec<i64> = answer
            .listings
            .as_ref()
            .unwrap()
            .iter()
            .map(|l| l.id)
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&first), ids(&second), "the same listings, not new rows");
    // One `listings.fetched` per finished fetch job, naming only the new listings.
    let fetched = standmeet::domain::events::list(&pool, None, None, 100)
        .await
        .unwrap();
    assert_eq!(fetched.len(), 8, "four sources, fetched twice");
    assert!(fetched.iter().all(|e| e.event_type == "listings.fetched"));
    let new_ids = |events: &[standmeet::domain::events::Event]| {
        let mut ids: Vec<i64> = events
            .iter()
            .flat_map(|e| e.data["new_listing_ids"].as_array().unwrap().clone())
            .map(|id| id.as_i64().unwrap())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(new_ids(&fetched[..4]), ids(&first));
    assert_eq!(new_ids(&fetched[4..]), Vec::<i64>::new());
    for event in &fetched {
        let job_id = event.data["job_id"].as_i64().unwrap();
        assert!(
            first.job_ids.contains(&JobId(job_id)) || second.job_ids.contains(&JobId(job_id)),
            "{event:?}"
        );
        assert_eq!(event.subject_id, event.data["source_id"].as_i64());
    }
    assert!(titles(&second).contains(&"Senior Product Designer".to_string()));
    assert_eq!(
        common::count(&pool, "SELECT count(*) FROM listings").await,
        8
    );

    // A posting that appears later is new in its fetch only.
    let grown = include_str!("../fixtures/boards/lever.json").replacen(
        "[",
        r#"[{"id": "added-1", "text": "Platform Engineer", "hostedUrl": "https://jobs.lever.co/globex/added-1", "categories": {"location": "Remote"}, "createdAt": 1795348800000},"#,
        1,
    );
    boards.serve("/lever/globex", "application/json", grown);
    let third = fetch_new(&app.state, Duration::from_secs(20))
        .await
        .unwrap();
    let new: Vec<&str> = third
        .listings
        .as_ref()
        .unwrap()
        .iter()
        .filter(|l| l.new)
        .map(|l| l.title.as_str())
        .collect();
    assert_eq!(new, ["Platform Engineer"]);
}

#[sqlx::test(migrations = false)]
async fn a_broken_board_is_reported_and_the_others_still_arrive(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = fetching_app(&pool, "20000").await;
    let boards = app.boards();
    let [greenhouse, lever, rss, atom] = add_samples(&pool, boards).await;
    boards.fail("/lever/globex", 404, 100);
    boards.serve(
        "/feeds/rust.rss",
        "text/html",
        "<html><body>Down for maintenance</body></html>",
    );
    // A server error is worth another try: the second attempt gets the board.
    boards.fail("/feeds/hooli.atom", 503, 1);

    let answer = fetch_new(&app.state, Duration::from_secs(20))
        .await
        .unwrap();
    assert!(!answer.pending);
    let errors = answer.errors.clone().unwrap();
    assert_eq!(errors.len(), 2, "{errors:?}");
    let lever_error = errors.iter().find(|e| e.source_id == Some(lever)).unwrap();
    assert_eq!(lever_error.state, JobState::Discarded);
    assert_eq!(lever_error.source.as_deref(), Some("Globex"));
    assert_eq!(
        lever_error.error,
        "the board answered 404 Not Found; check the source's URL"
    );
    let rss_error = errors.iter().find(|e| e.source_id == Some(rss)).unwrap();
    assert!(
        rss_error
            .error
            .starts_with("the answer is not an RSS or Atom feed"),
        "{}",
        rss_error.error
    );
    assert_eq!(boards.hits("/lever/globex"), 1, "a 404 is not retried");
    assert_eq!(boards.hits("/feeds/hooli.atom"), 2, "a 503 is retried");

    let listings = answer.listings.unwrap();
    assert_eq!(listings.len(), 5, "Greenhouse's 3 and Hooli's 2");
    assert!(
        listings
            .iter()
            .all(|l| [greenhouse, atom].contains(&l.source_id))
    );
}

#[sqlx::test(migrations = false)]
async fn an_answer_too_large_is_refused_with_a_reason(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = fetching_app(&pool, "20000").await;
    let boards = app.boards();
    listings::add_source(&pool, "Huge", "rss", &boards.url("/feeds/huge.rss"), true)
        .await
        .unwrap();
    boards.serve(
        "/feeds/huge.rss",
        "application/rss+xml",
        vec![b' '; listings::fetch::MAX_BODY_BYTES + 1],
    );
    let answer = fetch_new(&app.state, Duration::from_secs(20))
        .await
        .unwrap();
    let errors = answer.errors.unwrap();
    assert_eq!(errors[0].error, "the board's answer is larger than 5 MiB");
    assert_eq!(errors[0].state, JobState::Discarded);
}

#[sqlx::test(migrations = false)]
async fn a_receipt_is_redeemed_in_exactly_the_shape_of_a_fetch_that_finished_in_time(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = fetching_app(&pool, "300").await;
    let boards = app.boards();
    add_samples(&pool, boards).await;
    // Lever's board answers only once released: its fetch is still running for as long
    // as the checks of the receipt take (was: a 1.5 s delay, a race on a busy machine).
    boards.hold("/lever/globex");

    let receipt = structured(&app.call_tool("jobs.fetch_new", json!({})).await);
    assert_eq!(receipt["pending"], true);
    let keys = |value: &Value| {
        let mut keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    };
    assert_eq!(keys(&receipt), ["job_ids", "pending"]);
    let job_ids = receipt["job_ids"].clone();
    assert_eq!(job_ids.as_array().unwrap().len(), 4);

    // Still running: pending, in the receipt's shape.
    let early = structured(
        &app.call_tool("jobs.fetch_result", json!({ "job_ids": job_ids }))
            .await,
    );
    assert_eq!(early, receipt);

    boards.release("/lever/globex");
    for id in job_ids.as_array().unwrap() {
        wait_for_state(&pool, JobId(id.as_i64().unwrap()), JobState::Completed).await;
    }
    let redeemed = structured(
        &app.call_tool("jobs.fetch_result", json!({ "job_ids": job_ids }))
            .await,
    );
    assert_eq!(redeemed["pending"], false);
    assert_eq!(
        keys(&redeemed),
        ["errors", "job_ids", "listings", "pending"]
    );
    assert_eq!(redeemed["listings"].as_array().unwrap().len(), 8);

    // The same fetch, finished in time, answers the same object.
    let ids: Vec<JobId> = serde_json::from_value(job_ids).unwrap();
    let in_time = listings::fetch_result(&app.state.pool, &app.state.jobs, &ids)
        .await
        .unwrap();
    assert_eq!(serde_json::to_value(&in_time).unwrap(), redeemed);
    let listing = &redeemed["listings"][0];
    assert_eq!(
        keys(listing),
        [
            "company",
            "external_id",
            "first_seen_at",
            "id",
            "location",
            "new",
            "posted_at",
            "source_id",
            "title",
            "url"
        ]
    );

    // And a fetch that does finish within the wait answers the same shape at once.
    // Another app (its sources still point at the first app's boards).
    let fast_app = fetch_desk(&pool, "20000").jobs().spawn().await;
    let done = structured(&fast_app.call_tool("jobs.fetch_new", json!({})).await);
    assert_eq!(done["pending"], false);
    assert_eq!(keys(&done), keys(&redeemed));
}

#[sqlx::test(migrations = false)]
async fn fetching_again_while_a_sources_fetch_is_pending_answers_the_same_job(pool: PgPool) {
    crate::common::schema(&pool).await;
    // No engine: every fetch stays pending.
    let app = fetch_desk(&pool, "100").boards().spawn().await;
    let sources = add_samples(&pool, app.boards()).await;
    let first = structured(&app.call_tool("jobs.fetch_new", json!({})).await);
    assert_eq!(first["pending"], true);
    let second = structured(&app.call_tool("jobs.fetch_new", json!({})).await);
    assert_eq!(second["job_ids"], first["job_ids"], "the same four jobs");
    let one = structured(
        &app.call_tool("jobs.fetch_new", json!({ "source_ids": [sources[1]] }))
            .await,
    );
    assert_eq!(one["job_ids"], json!([first["job_ids"][1]]));
    let fetches: i64 =
        sqlx::query_scalar("SELECT count(*) FROM jobs WHERE kind = 'jobs.fetch_source'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(fetches, 4, "one job per source, however often asked");

    // Once they finished, the next fetch is new jobs.
    // (Its sources are the first app's boards, on loopback.)
    let fetched = fetch_desk(&pool, "20000")
        .setting("STANDMEET_FETCH_ALLOW_PRIVATE", "true")
        .jobs()
        .spawn()
        .await;
    for id in first["job_ids"].as_array().unwrap() {
        wait_for_state(&pool, JobId(id.as_i64().unwrap()), JobState::Completed).await;
    }
    let again = structured(&fetched.call_tool("jobs.fetch_new", json!({})).await);
    assert_eq!(again["pending"], false);
    for (new, old) in again["job_ids"]
        .as_array()
        .unwrap()
        .iter()
        .zip(first["job_ids"].as_array().unwrap())
    {
        assert_ne!(new, old);
    }
}

#[sqlx::test(migrations = false)]
async fn fetch_tools_refuse_what_they_cannot_answer(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = fetching_app(&pool, "20000").await;

    let none = app.call_tool("jobs.fetch_new", json!({})).await;
    assert_eq!(none["isError"], true);
    assert!(
        structured(&none)["error"]
            .as_str()
            .unwrap()
            .contains("No source is enabled")
    );

    let [greenhouse, ..] = add_samples(&pool, app.boards()).await;
    listings::set_enabled(&pool, greenhouse, false)
        .await
        .unwrap();
    let disabled = app
        .call_tool("jobs.fetch_new", json!({ "source_ids": [greenhouse] }))
        .await;
    assert_eq!(disabled["isError"], true);
    assert!(
        structured(&disabled)["error"]
            .as_str()
            .unwrap()
            .contains("is disabled")
    );
    let unknown = app
        .call_tool("jobs.fetch_new", json!({ "source_ids": [999] }))
        .await;
    assert_eq!(structured(&unknown)["error"], "There is no source 999.");
    assert_eq!(common::count(&pool, "SELECT count(*) FROM jobs").await, 0);

    let empty = app
        .call_tool("jobs.fetch_result", json!({ "job_ids": [] }))
        .await;
    assert_eq!(empty["isError"], true);
    let missing = app
        .call_tool("jobs.fetch_result", json!({ "job_ids": [424242] }))
        .await;
    assert!(
        structured(&missing)["error"]
            .as_str()
            .unwrap()
            .starts_with("There is no job 424242")
    );
    let noop = crate::common::jobs::insert::<standmeet_jobs::builtin::Noop>(&pool, &json!({}))
        .await
        .unwrap();
    let foreign = app
        .call_tool("jobs.fetch_result", json!({ "job_ids": [noop.0] }))
        .await;
    assert_eq!(
        structured(&foreign)["error"],
        format!(
            "Job {} is not a listings fetch (it is system.noop).",
            noop.0
        )
    );
    let wrong_type = app
        .call_tool("jobs.fetch_result", json!({ "job_ids": "7" }))
        .await;
    assert_eq!(wrong_type["isError"], true);

    // Only the chosen sources are fetched.
    let sources = listings::sources(&pool).await.unwrap();
    let globex = sources.iter().find(|s| s.name == "Globex").unwrap().id;
    let chosen = structured(
        &app.call_tool("jobs.fetch_new", json!({ "source_ids": [globex] }))
            .await,
    );
    assert_eq!(chosen["job_ids"].as_array().unwrap().len(), 1);
    assert_eq!(chosen["listings"].as_array().unwrap().len(), 2);
}

#[sqlx::test(migrations = false)]
async fn sources_are_checked_and_bad_ones_write_nothing(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::builder(pool.clone()).spawn().await;
    let cookie = app.sign_in_admin().await;
    let add = |name: &'static str, kind: &'static str, url: &'static str| {
        let router = app.router.clone();
        let cookie = cookie.clone();
        async move {
            common::post_form(
                &router,
                "/api/listings/add_source",
                &[("name", name), ("kind", kind), ("url", url)],
                Some(&cookie),
            )
            .await
        }
    };
    for (name, kind, url, message) in [
        (
            "",
            "rss",
            "https://a.example/feed",
            "a name of 1 to 100 characters",
        ),
        (
            "Feed",
            "workday",
            "https://a.example/feed",
            "greenhouse, lever or rss",
        ),
        ("Feed", "rss", "", "Give the board's URL"),
        ("Feed", "rss", "a.example/feed", "is not a URL"),
        (
            "Feed",
            "rss",
            "ftp://a.example/feed",
            "must start with http:// or https://",
        ),
    ] {
        let reply = add(name, kind, url).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{url}: {}",
            reply.body
        );
        assert!(reply.body.contains(message), "{}", reply.body);
    }
    assert_eq!(
        common::count(&pool, "SELECT count(*) FROM listing_sources").await,
        0
    );

    let added = add("Feed", "rss", "https://a.example/feed").await;
    assert_eq!(added.status, StatusCode::OK, "{}", added.body);
    let again = add("Same feed", "rss", "https://a.example/feed").await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST);
    assert!(again.body.contains("exists already"));
    assert_eq!(
        common::count(&pool, "SELECT count(*) FROM listing_sources").await,
        1
    );

    let gone = app
        .post_form(
            "/api/listings/remove_source",
            &[("id", "999")],
            Some(&cookie),
        )
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert!(gone.body.contains("There is no source 999"));

    // Without a session nothing is changed.
    let anonymous = app
        .post_form(
            "/api/listings/add_source",
            &[
                ("name", "X"),
                ("kind", "rss"),
                ("url", "https://b.example/feed"),
            ],
            None,
        )
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let page = app.get_with_cookie("/admin/listings", &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(r#"data-testid="source-row""#));
}

#[sqlx::test(migrations = false)]
async fn the_page_shows_a_listing_seen_on_two_boards_once_with_its_boards(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = fetching_app(&pool, "20000").await;
    add_samples(&pool, app.boards()).await;
    fetch_new(&app.state, Duration::from_secs(20))
        .await
        .unwrap();
    let cookie = app.sign_in_admin().await;
    let page = app.get_with_cookie("/admin/listings", &cookie).await;
    assert_eq!(page.body.matches(r#"data-testid="listing-row""#).count(), 8);
    assert!(
        !page.body.contains("at Acme Robotics"),
        "the employer's board's words, not the feed's"
    );
    assert!(
        page.body.contains("Acme, Rust Jobs Weekly"),
        "the boards that list it"
    );
    assert_eq!(page.body.matches(r#"data-testid="listing-new""#).count(), 8);
    assert_eq!(
        page.body.matches(r#"data-state="fetched""#).count(),
        4,
        "a chip per source"
    );
}

#[sqlx::test(migrations = false)]
async fn removing_a_source_keeps_the_listings_another_source_lists(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = fetching_app(&pool, "20000").await;
    let [greenhouse, _, rss, _] = add_samples(&pool, app.boards()).await;
    fetch_new(&app.state, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(
        common::count(&pool, "SELECT count(*) FROM listings").await,
        8
    );

    listings::remove_source(&pool, greenhouse).await.unwrap();
    // Greenhouse's 3 go but the one the feed lists too, now shown from the feed.
    assert_eq!(
        common::count(&pool, "SELECT count(*) FROM listings").await,
        6
    );
    let rows = listings::latest(&pool, 50).await.unwrap();
    let relisted = rows
        .iter()
        .find(|row| row.listing.title == "Backend Engineer (Rust)")
        .expect("the posting the feed lists too stays");
    assert_eq!(relisted.listing.source_id, rss);
    assert_eq!(relisted.listing.external_id, "rustjobs-1187");
    assert_eq!(relisted.seen_on, ["Rust Jobs Weekly"]);

    // The feed's next fetch shows its own words, and nothing comes back as new.
    let again = listings::fetch_new(
        &app.state.pool,
        &app.state.jobs,
        Duration::from_secs(20),
        Some(&[rss]),
    )
    .await
    .unwrap();
    assert_eq!(again.new_count(), 0);
    assert!(titles(&again).contains(&"Backend Engineer (Rust) at Acme Robotics".to_string()));
}
