//! The corpus: write receipts that say whether the index holds the write, searches that
//! read their own write, one index job per entry however often saved, CJK, who sees restricted entries, bad
//! queries, and re-indexing at start.

use crate::common;
use crate::common::jobs::client as jobs_client;

use std::time::Duration;

use axum::http::StatusCode;
use common::jobs::wait_for_state;
use common::mcp::{TOKEN, structured};
use common::{TestApp, TestAppBuilder};
use serde_json::json;
use sqlx::PgPool;
use standmeet::domain::corpus::{self, Status, Visibility};
use standmeet::state::AppState;
use standmeet_jobs::{JobId, JobState};

/// The app with the MCP token set and writes waiting up to `index_wait_ms` for their
/// index. Without `.jobs()` nothing runs the index jobs.
fn corpus_desk(pool: &PgPool, index_wait_ms: &str) -> TestAppBuilder {
    TestApp::builder(pool.clone())
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .setting("STANDMEET_INDEX_WAIT_MS", index_wait_ms)
}

/// The ids a visitor's search finds (no session unless `cookie`).
async fn visitor_finds(app: &TestApp, q: &str, cookie: Option<&str>) -> Vec<i64> {
    let path = format!("/api/search?q={}", url_encoded(q));
    let reply = match cookie {
        Some(cookie) => app.get_with_cookie(&path, cookie).await,
        None => app.get(&path).await,
    };
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.json()["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["id"].as_i64().unwrap())
        .collect()
}

/// Creates and promotes an entry, waiting for its index; answers its id.
async fn promoted_entry(state: &AppState, title: &str, body: &str, visibility: &str) -> i64 {
    let written = corpus::create(&state.pool, &state.jobs, title, body, visibility)
        .await
        .unwrap();
    let promoted = corpus::promote(&state.pool, &state.jobs, written.id)
        .await
        .unwrap();
    let receipt = corpus::receipt(&state.pool, &state.jobs, Duration::from_secs(2), promoted)
        .await
        .unwrap();
    assert!(receipt.indexed);
    written.id
}

fn url_encoded(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

#[sqlx::test(migrations = false)]
async fn a_receipt_saying_indexed_means_a_search_right_after_finds_the_entry(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = corpus_desk(&pool, "2000").jobs().spawn().await;
    let created = structured(
        &app.call_tool(
            "corpus.create",
            json!({ "title": "Harbour walks", "body": "The ferry leaves the harbour at dawn; walkers follow the pier.", "visibility": "public" }),
        )
        .await,
    );
    assert_eq!(created["indexed"], true, "{created}");
    let id = created["id"].as_i64().unwrap();
    // A draft: nobody finds it yet.
    assert!(visitor_finds(&app, "harbour", None).await.is_empty());

    let promoted = structured(&app.call_tool("corpus.promote", json!({ "id": id })).await);
    assert_eq!(promoted["indexed"], true);
    assert_eq!(promoted["id"], id);
    assert_ne!(promoted["index_job_id"], created["index_job_id"]);
    assert_eq!(visitor_finds(&app, "harbour", None).await, [id]);
    // English stemming: "walk" finds "walks".
    assert_eq!(visitor_finds(&app, "walk", None).await, [id]);

    let found = structured(
        &app.call_tool("corpus.search", json!({ "q": "ferry" }))
            .await,
    );
    assert_eq!(found["results"][0]["id"], id);
    assert_eq!(found["results"][0]["title"], "Harbour walks");
    assert!(
        found["results"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("**ferry**"),
        "{found}"
    );

    // An update is found by its new words right after its receipt.
    let updated = structured(
        &app.call_tool(
            "corpus.update",
            json!({ "id": id, "body": "Lighthouse tours start at noon." }),
        )
        .await,
    );
    assert_eq!(updated["indexed"], true);
    assert_eq!(visitor_finds(&app, "lighthouse", None).await, [id]);
    assert!(visitor_finds(&app, "ferry", None).await.is_empty());
}

#[sqlx::test(migrations = false)]
async fn with_the_index_queue_stopped_the_receipt_says_not_indexed_and_the_job_brings_it_later(
    pool: PgPool,
) {
    crate::common::schema(&pool).await;
    // No engine: nothing runs the index job.
    let app = corpus_desk(&pool, "300").spawn().await;
    let created = structured(
        &app.call_tool(
            "corpus.create",
            json!({ "title": "Night market", "body": "Stalls open after dark.", "visibility": "public" }),
        )
        .await,
    );
    assert_eq!(created["indexed"], false);
    let id = created["id"].as_i64().unwrap();
    let promoted = structured(&app.call_tool("corpus.promote", json!({ "id": id })).await);
    assert_eq!(promoted["indexed"], false);
    assert!(visitor_finds(&app, "stalls", None).await.is_empty());
    let cookie = app.sign_in_admin().await;
    let page = app.get_with_cookie("/admin/corpus", &cookie).await;
    assert!(
        page.body.contains(r#"data-state="indexing""#),
        "the chip says indexing"
    );

    assert_eq!(
        promoted["index_job_id"], created["index_job_id"],
        "the promotion found the entry's index job on the way"
    );

    // The engine starts: the one job indexes the newest version.
    let app = corpus_desk(&pool, "300").jobs().spawn().await;
    let job = JobId(promoted["index_job_id"].as_i64().unwrap());
    let done = wait_for_state(&pool, job, JobState::Completed).await;
    assert_eq!(done.output.unwrap()["version"], 2);
    assert_eq!(visitor_finds(&app, "stalls", None).await, [id]);
}

/// The version and body the index holds for entry `id`.
async fn in_index(pool: &PgPool, id: i64) -> (i64, String) {
    sqlx::query_as("SELECT version, body FROM corpus_index WHERE entry_id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrations = false)]
async fn ten_saves_in_a_row_leave_one_index_job_waiting_and_the_index_ends_with_the_last(
    pool: PgPool,
) {
    crate::common::schema(&pool).await;
    // No engine while saving: every save finds the job the first one queued.
    let first = corpus::create(
        &pool,
        &jobs_client(&pool),
        "Ferry times",
        "Version 0",
        "public",
    )
    .await
    .unwrap();
    let mut last = first;
    for n in 1..10 {
        last = corpus::update(
            &pool,
            &jobs_client(&pool),
            first.id,
            None,
            Some(&format!("Version {n}")),
            None,
        )
        .await
        .unwrap();
        assert_eq!(last.job, first.job, "save {n} answered the waiting job");
    }
    let waiting: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE kind = 'corpus.index' AND finalized_at IS NULL",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(waiting, 1);

    let app = corpus_desk(&pool, "2000").jobs().spawn().await;
    let done = wait_for_state(&pool, first.job, JobState::Completed).await;
    assert_eq!(done.output.unwrap()["version"], last.version);
    assert_eq!(in_index(&pool, first.id).await.1, "Version 9");
    // Saves while the engine runs: each receipt is for a version the index then holds.
    for n in 10..20 {
        let body = format!("Version {n}");
        let receipt = structured(
            &app.call_tool("corpus.update", json!({ "id": first.id, "body": body }))
                .await,
        );
        assert_eq!(receipt["indexed"], true, "save {n}: {receipt}");
    }
    assert_eq!(in_index(&pool, first.id).await, (20, "Version 19".into()));
}

#[sqlx::test(migrations = false)]
async fn an_index_write_of_an_older_version_never_overwrites_a_newer_one(pool: PgPool) {
    crate::common::schema(&pool).await;
    let first = corpus::create(
        &pool,
        &jobs_client(&pool),
        "Tide tables",
        "Low tide at six.",
        "public",
    )
    .await
    .unwrap();
    let second = corpus::update(
        &pool,
        &jobs_client(&pool),
        first.id,
        None,
        Some("Low tide at nine."),
        None,
    )
    .await
    .unwrap();
    assert_eq!(second.version, 2);
    let mut app = corpus_desk(&pool, "2000").jobs().spawn().await;
    let done = wait_for_state(&pool, second.job, JobState::Completed).await;
    assert_eq!(done.output.unwrap()["version"], 2);
    // What follows writes the index by hand, with no engine around.
    app.stop_jobs().await;

    // Even an older write that got past the version check loses to the newer one.
    let mut tx = pool.begin().await.unwrap();
    let older_write = corpus::IndexInput {
        entry_id: first.id,
        version: 1,
        title: "Tide tables".into(),
        body: "Low tide at six.".into(),
        visibility: Visibility::Public,
        status: Status::Draft,
        tags: Vec::new(),
    };
    let written = corpus::write_index(&mut tx, &[older_write]).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(written, 0);
    assert_eq!(
        in_index(&pool, first.id).await,
        (2, "Low tide at nine.".into())
    );
}

#[sqlx::test(migrations = false)]
async fn cjk_text_is_found_without_spaces(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = corpus_desk(&pool, "2000").jobs().spawn().await;
    let mut ids = Vec::new();
    for (title, body) in [
        ("東京タワー", "東京タワーは夜にきれいです。"),
        ("大阪城", "大阪城の桜は春に咲きます。"),
        ("서울 타워", "남산서울타워에서 야경을 봅니다."),
    ] {
        ids.push(promoted_entry(&app.state, title, body, "public").await);
    }
    assert_eq!(visitor_finds(&app, "東京", None).await, [ids[0]]);
    assert_eq!(visitor_finds(&app, "タワー", None).await, [ids[0]]);
    assert_eq!(visitor_finds(&app, "桜", None).await, [ids[1]]);
    assert_eq!(visitor_finds(&app, "서울타워", None).await, [ids[2]]);
    assert!(visitor_finds(&app, "京都", None).await.is_empty());

    let reply = app
        .get(&format!("/api/search?q={}", url_encoded("東京")))
        .await;
    let snippet = &reply.json()["hits"][0]["snippet"];
    assert!(
        snippet
            .as_array()
            .unwrap()
            .iter()
            .any(|piece| piece["mark"] == true && piece["text"] == "東京"),
        "{snippet}"
    );
    // The page says when nothing matched.
    let page = app.get(&format!("/search?q={}", url_encoded("京都"))).await;
    assert!(page.body.contains("No results for “京都”"), "{}", page.body);
    let page = app.get(&format!("/search?q={}", url_encoded("東京"))).await;
    assert_eq!(
        page.body.matches(r#"data-testid="search-result""#).count(),
        1
    );
}

#[sqlx::test(migrations = false)]
async fn restricted_entries_are_found_only_after_an_access_code(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = corpus_desk(&pool, "2000").jobs().spawn().await;
    let mut ids = Vec::new();
    for visibility in ["public", "restricted"] {
        let title = format!("Orchard notes ({visibility})");
        ids.push(promoted_entry(&app.state, &title, "Apple harvest notes.", visibility).await);
    }
    assert_eq!(visitor_finds(&app, "apple", None).await, [ids[0]]);
    let agent = structured(
        &app.call_tool("corpus.search", json!({ "q": "apple" }))
            .await,
    );
    assert_eq!(agent["results"].as_array().unwrap().len(), 1);

    // A replied request whose code the visitor redeems.
    let code = "K7QF-2MZP-9HXA";
    sqlx::query(
        "INSERT INTO access_requests (name, email, status, code_hash, replied_at) VALUES ('Vi', 'vi@example.com', 'replied', $1, now())",
    )
    .bind(standmeet::domain::secrets::code_hash(code))
    .execute(&pool)
    .await
    .unwrap();
    let redeemed = app
        .post_form(
            "/api/redeem_access",
            &[("email", "vi@example.com"), ("code", code)],
            None,
        )
        .await;
    assert_eq!(redeemed.status, StatusCode::OK, "{}", redeemed.body);
    let cookie = redeemed.session_cookie().unwrap();
    let mut found = visitor_finds(&app, "apple", Some(&cookie)).await;
    found.sort();
    assert_eq!(found, ids);
}

#[sqlx::test(migrations = false)]
async fn bad_queries_and_bad_writes_get_a_clear_answer_and_change_nothing(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = corpus_desk(&pool, "100").spawn().await;
    for (q, status, message) in [
        ("", StatusCode::BAD_REQUEST, "Type something to search for."),
        (
            "   ",
            StatusCode::BAD_REQUEST,
            "Type something to search for.",
        ),
    ] {
        let reply = app.get(&format!("/api/search?q={}", url_encoded(q))).await;
        assert_eq!(reply.status, status);
        assert_eq!(reply.json()["message"], message);
    }
    let long = "a".repeat(10 * 1024);
    let reply = app.get(&format!("/api/search?q={long}")).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        reply.json()["message"],
        "A search is at most 200 characters; this one has 10240."
    );
    let nul = app.get("/api/search?q=a%00b").await;
    assert_eq!(nul.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        nul.json()["message"],
        "A search cannot contain control characters such as tabs or NUL."
    );
    // Query syntax a person might type is not an error.
    for q in ["!!!", "\"unclosed", "a & | b", "-", "' OR 1=1 --", "%_\\"] {
        assert!(visitor_finds(&app, q, None).await.is_empty(), "{q}");
    }
    let page = app.get(&format!("/search?q={long}")).await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
    assert!(page.body.contains("A search is at most 200 characters"));

    let tool = app.call_tool("corpus.search", json!({ "q": long })).await;
    assert_eq!(tool["isError"], true);
    for (arguments, message) in [
        (
            json!({ "title": "", "body": "x", "visibility": "public" }),
            "Give a title of 1 to 300 characters.",
        ),
        (
            json!({ "title": "T", "body": " ", "visibility": "public" }),
            "Write the entry's text.",
        ),
        (
            json!({ "title": "T", "body": "x", "visibility": "secret" }),
            "The visibility must be public or restricted; it was \"secret\".",
        ),
    ] {
        let refused = app.call_tool("corpus.create", arguments).await;
        assert_eq!(refused["isError"], true);
        assert_eq!(structured(&refused)["error"], message);
    }
    let missing = app.call_tool("corpus.promote", json!({ "id": 77 })).await;
    assert_eq!(structured(&missing)["error"], "There is no entry 77.");
    let nothing = app.call_tool("corpus.update", json!({ "id": 77 })).await;
    assert_eq!(
        structured(&nothing)["error"],
        "Give at least one of title, body and visibility to change."
    );
    assert_eq!(
        common::count(&pool, "SELECT count(*) FROM corpus_entries").await,
        0
    );
    assert_eq!(common::count(&pool, "SELECT count(*) FROM jobs").await, 0);

    // The admin's page: 400 for a bad write, 401 without a session.
    let cookie = app.sign_in_admin().await;
    let bad = app
        .post_form(
            "/api/corpus/create",
            &[("title", "T"), ("body", ""), ("visibility", "public")],
            Some(&cookie),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let anonymous = app
        .post_form(
            "/api/corpus/create",
            &[("title", "T"), ("body", "x"), ("visibility", "public")],
            None,
        )
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        common::count(&pool, "SELECT count(*) FROM corpus_entries").await,
        0
    );
}

#[sqlx::test(migrations = false)]
async fn the_admins_grep_finds_substrings_drafts_included(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = corpus_desk(&pool, "2000").jobs().spawn().await;
    for (title, body) in [
        ("Config notes", "Set STANDMEET_INDEX_WAIT_MS=2000 to wait."),
        ("Percent", "100% of the 5_000 entries."),
        ("Other", "Nothing to see."),
    ] {
        let written = corpus::create(&pool, &jobs_client(&pool), title, body, "public")
            .await
            .unwrap();
        corpus::receipt(&pool, &app.state.jobs, Duration::from_secs(2), written)
            .await
            .unwrap();
    }
    let titles = |grep: &str| {
        let pool = pool.clone();
        let grep = grep.to_string();
        async move {
            corpus::entries(&pool, Some(&grep), 50)
                .await
                .unwrap()
                .into_iter()
                .map(|row| row.title)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(titles("index_wait").await, ["Config notes"]);
    assert_eq!(
        titles("DEX_WA").await,
        ["Config notes"],
        "any case, inside words"
    );
    assert_eq!(titles("100%").await, ["Percent"]);
    assert_eq!(titles("5_0").await, ["Percent"]);
    assert!(
        titles("%").await == ["Percent"],
        "a % is a character, not a wildcard"
    );
    assert!(titles("nowhere").await.is_empty());

    let cookie = app.sign_in_admin().await;
    let page = app
        .get_with_cookie("/admin/corpus?grep=index_wait", &cookie)
        .await;
    assert_eq!(page.body.matches(r#"data-testid="corpus-row""#).count(), 1);
    assert_eq!(
        page.body
            .matches(r#"data-testid="index-state" data-state="indexed""#)
            .count(),
        1
    );
    let none = app
        .get_with_cookie("/admin/corpus?grep=nowhere", &cookie)
        .await;
    assert!(none.body.contains("No entry contains “nowhere”."));
}

#[sqlx::test(migrations = false)]
async fn at_start_entries_whose_index_lags_are_queued_again(pool: PgPool) {
    crate::common::schema(&pool).await;
    let written = corpus::create(
        &pool,
        &jobs_client(&pool),
        "Lost write",
        "Written while the index job was lost.",
        "public",
    )
    .await
    .unwrap();
    // The job was lost (say, discarded by an operator); nothing would index the entry.
    sqlx::query("UPDATE jobs SET state = 'discarded', finalized_at = now() WHERE id = $1")
        .bind(written.job.0)
        .execute(&pool)
        .await
        .unwrap();
    let app = corpus_desk(&pool, "100").spawn().await;
    let cookie = app.sign_in_admin().await;
    let page = app.get_with_cookie("/admin/corpus", &cookie).await;
    assert!(
        page.body.contains(r#"data-state="failed""#),
        "the chip says failed"
    );

    assert_eq!(
        corpus::reindex_lagging(&pool, &jobs_client(&pool))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        corpus::reindex_lagging(&pool, &jobs_client(&pool))
            .await
            .unwrap(),
        0,
        "queued once"
    );
    let _engine = corpus_desk(&pool, "100").jobs().spawn().await;
    let entry = corpus::entry(&pool, written.id).await.unwrap();
    let job = JobId(entry.index_job_id.unwrap());
    assert_ne!(job, written.job);
    wait_for_state(&pool, job, JobState::Completed).await;
    assert_eq!(
        corpus::entry(&pool, written.id)
            .await
            .unwrap()
            .index_state
            .as_str(),
        "indexed"
    );
}

#[sqlx::test(migrations = false)]
async fn an_entry_made_restricted_is_hidden_at_once_before_its_index_job_runs(pool: PgPool) {
    crate::common::schema(&pool).await;
    let mut first = corpus_desk(&pool, "2000").jobs().spawn().await;
    let id = promoted_entry(
        &first.state,
        "Garden diary",
        "Tomatoes ripen in August.",
        "public",
    )
    .await;
    assert_eq!(visitor_finds(&first, "tomatoes", None).await, [id]);
    // The index job of the change below must not run: the engine is gone before it.
    first.stop_jobs().await;

    // No engine now: the index still says public.
    let app = corpus_desk(&pool, "100").spawn().await;
    let written = corpus::update(
        &pool,
        &jobs_client(&pool),
        id,
        None,
        None,
        Some("restricted"),
    )
    .await
    .unwrap();
    let receipt = corpus::receipt(
        &pool,
        &first.state.jobs,
        Duration::from_millis(100),
        written,
    )
    .await
    .unwrap();
    assert!(!receipt.indexed);
    assert!(visitor_finds(&app, "tomatoes", None).await.is_empty());
    let agent = structured(
        &app.call_tool("corpus.search", json!({ "q": "tomatoes" }))
            .await,
    );
    assert_eq!(agent["results"], json!([]));
}

/// The rendered body on `/entries/<id>` as a visitor without a code gets it.
async fn rendered_body(app: &TestApp, id: i64) -> String {
    let page = app.get(&format!("/entries/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    let start = page
        .body
        .find(r#"data-testid="entry-body""#)
        .expect("the entry's body");
    let body = &page.body[start..];
    body[..body.find("</article>").expect("the article's end")].to_string()
}

#[sqlx::test(migrations = false)]
async fn a_body_renders_as_markdown_with_scripts_inert_and_wikilinks_only_where_the_reader_may_go(
    pool: PgPool,
) {
    crate::common::schema(&pool).await;
    let app = corpus_desk(&pool, "2000").jobs().spawn().await;
    let harbour = promoted_entry(&app.state, "Harbour", "Boats come in at noon.", "public").await;
    promoted_entry(&app.state, "Vault notes", "Kept for friends.", "restricted").await;
    let id = promoted_entry(
        &app.state,
        "Lighthouse",
        "The **lighthouse** keeper %%a private aside%% waves.\n\nSee [[Harbour|the harbour]] and [[Vault notes]].\n\n<script>alert('x')</script><img src=x onerror=\"alert('y')\">\n\nA [go](javascript:alert('z')) link.\n\n![[map.png]]",
        "public",
    )
    .await;
    let body = rendered_body(&app, id).await;
    assert!(body.contains("<strong>lighthouse</strong>"), "{body}");
    assert!(
        body.contains(&format!(
            r#"<a href="/entries/{harbour}" rel="noopener noreferrer nofollow">the harbour</a>"#
        )),
        "{body}"
    );
    // Restricted, and this visitor has no code: its name as text, no link.
    assert!(body.contains("and Vault notes."), "{body}");
    assert_eq!(body.matches(r#"href="/entries/"#).count(), 1, "{body}");
    for inert in [
        "<script",
        "onerror",
        "javascript:",
        "alert('x')",
        "private aside",
        "map.png",
    ] {
        assert!(!body.contains(inert), "{inert} in {body}");
    }
    // Search finds the words, and its snippet shows no markup.
    assert_eq!(visitor_finds(&app, "lighthouse keeper", None).await, [id]);
    let hits = app.get("/api/search?q=keeper").await.json();
    let snippet: String = hits["hits"][0]["snippet"]
        .as_array()
        .unwrap()
        .iter()
        .map(|piece| piece["text"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !snippet.contains("**") && !snippet.contains("[["),
        "{snippet}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_note_of_500_wikilinks_on_a_vault_of_10000_notes_costs_an_index_lookup_per_link(
    pool: PgPool,
) {
    crate::common::schema(&pool).await;
    // 10,000 notes, as a rebuild would have made them (promoted, public, indexed).
    sqlx::query(
        r#"
        WITH made AS (
            INSERT INTO corpus_entries (title, body, visibility, status)
            SELECT 'Note ' || n, 'Text ' || n, 'public', 'promoted' FROM generate_series(1, 10000) n
            RETURNING id, title
        ), indexed AS (
            INSERT INTO corpus_index (entry_id, version, title, body, visibility, status, document, grep_text)
            SELECT id, 1, title, title, 'public', 'promoted', to_tsvector('simple', title), lower(title)
            FROM made
        )
        INSERT INTO corpus_vault_notes (path, entry_id, name, aliases, content_hash)
        SELECT 'Folder/' || title || '.md', id, lower(title), ARRAY['alias ' || lower(title)], 'h'
        FROM made
        "#,
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE").execute(&pool).await.unwrap();

    // Links by name, by path and by alias, and some that go nowhere.
    let mut markdown = String::new();
    for n in 1..=500 {
        match n % 4 {
            0 => markdown.push_str(&format!("[[Note {n}]] ")),
            1 => markdown.push_str(&format!("[[Folder/Note {n}]] ")),
            2 => markdown.push_str(&format!("[[Alias Note {n}]] ")),
            _ => markdown.push_str(&format!("[[Nowhere {n}]] ")),
        }
    }
    let names = corpus::markdown::wikilink_targets(&markdown);
    assert_eq!(names.len(), 500);
    let plan: Vec<String> =
        sqlx::query_scalar(&format!("EXPLAIN {}", corpus::WIKILINK_TARGETS_SQL))
            .bind(&names)
            .bind(false)
            .bind(false)
            .fetch_all(&pool)
            .await
            .unwrap();
    let plan = plan.join("\n");
    assert!(
        !plan.contains("Seq Scan on corpus_vault_notes"),
        "the notes table is read whole:\n{plan}"
    );
    for index in [
        "corpus_vault_notes_name_idx",
        "corpus_vault_notes_path_lower_idx",
        "corpus_vault_notes_aliases_idx",
    ] {
        assert!(plan.contains(index), "{index} is not used:\n{plan}");
    }

    // And the links go where they should: 375 notes found, 125 names plain text.
    let html = corpus::body_html(
        &pool,
        &markdown,
        corpus::Reader::Visitor {
            restricted_allowed: false,
        },
    )
    .await
    .unwrap();
    assert_eq!(html.matches("<a href=\"/entries/").count(), 375, "{html}");
    assert!(html.contains("Nowhere 3"), "{html}");
}
