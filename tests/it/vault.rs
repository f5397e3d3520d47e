//! The corpus from an Obsidian vault (docs/corpus.md), with the sample vault of the
//! repository copied to a temporary folder: the first rebuild imports every note but
//! the broken one; a second changes nothing; a changed, a removed and a new note are
//! updated, removed and added, entries made elsewhere stay, and `corpus.rebuilt`
//! records what changed; wikilinks link between the imported entries; the watcher
//! queues a rebuild when a note is written; without a vault the tool says so.

use crate::common;
use crate::common::jobs::client as jobs_client;

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::StatusCode;
use common::TestApp;
use common::jobs::wait_until;
use common::mcp::{TOKEN, structured};
use serde_json::{Value, json};
use sqlx::PgPool;
use standmeet::domain::corpus;

/// The notes of `vault-sample/`: every `*.md` outside dot-folders.
const SAMPLE_NOTES: u64 = 31;

/// A copy of the sample vault that the test may change.
fn sample_vault() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("vault-sample"),
        dir.path(),
    );
    let root = dir.path().to_path_buf();
    (dir, root)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

async fn vault_app(pool: &PgPool, root: &Path) -> TestApp {
    TestApp::desk(pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .setting("STANDMEET_VAULT", root.to_str().unwrap())
        .jobs()
        .spawn()
        .await
}

async fn rebuild(app: &TestApp) -> Value {
    let answer = app.call_tool("corpus.rebuild", json!({})).await;
    assert_ne!(answer["isError"], json!(true), "{answer}");
    let answer = structured(&answer);
    assert_eq!(answer["pending"], false, "{answer}");
    answer
}

/// Waits until the index holds every entry's newest version.
async fn all_indexed(pool: &PgPool) {
    wait_until(Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM corpus_entries e LEFT JOIN corpus_index i ON i.entry_id = e.id WHERE i.version IS DISTINCT FROM e.version",
        )
        .fetch_one(pool)
        .await
        .unwrap()
            == 0
    })
    .await;
}

async fn entry_of(pool: &PgPool, path: &str) -> (i64, i64) {
    sqlx::query_as(
        "SELECT e.id, e.version FROM corpus_vault_notes v JOIN corpus_entries e ON e.id = v.entry_id WHERE v.path = $1",
    )
    .bind(path)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_rebuild_imports_the_vault_then_follows_its_changes_and_records_what_changed(
    pool: PgPool,
) {
    crate::common::schema(&pool).await;
    let (_dir, root) = sample_vault();
    let app = vault_app(&pool, &root).await;
    // An entry written by hand: no rebuild touches it.
    let by_hand = corpus::create(
        &pool,
        &jobs_client(&pool),
        "Written by hand",
        "Not from the vault.",
        "public",
    )
    .await
    .unwrap();

    let first = rebuild(&app).await;
    let mut keys: Vec<&String> = first.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "added",
            "failed",
            "job_id",
            "pending",
            "removed",
            "unchanged",
            "updated"
        ]
    );
    assert_eq!(first["added"], SAMPLE_NOTES - 1, "{first}");
    assert_eq!(
        (first["updated"].as_u64(), first["removed"].as_u64()),
        (Some(0), Some(0))
    );
    let failed = first["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{first}");
    assert_eq!(failed[0]["path"], "Broken front matter.md");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("not valid YAML")
    );
    // Front matter: title, publish, visibility; without it the heading or file name.
    let (title, status, visibility): (String, String, String) = sqlx::query_as(
        "SELECT e.title, e.status::text, e.visibility::text FROM corpus_vault_notes v JOIN corpus_entries e ON e.id = v.entry_id WHERE v.path = 'Places/Neighbours.md'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (title.as_str(), status.as_str(), visibility.as_str()),
        ("Neighbours", "promoted", "restricted")
    );
    let garden: (String, String) = sqlx::query_as(
        "SELECT e.title, e.status::text FROM corpus_vault_notes v JOIN corpus_entries e ON e.id = v.entry_id WHERE v.path = 'Ideas/Garden.md'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(garden, ("Garden plans".to_string(), "draft".to_string()));
    let rebuilt: Vec<Value> =
        sqlx::query_scalar("SELECT data FROM events WHERE type = 'corpus.rebuilt' ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        rebuilt,
        [
            json!({ "job_id": first["job_id"], "added": SAMPLE_NOTES - 1, "updated": 0, "removed": 0 })
        ]
    );

    // Nothing changed: nothing written, no event, versions kept.
    let (lighthouse, version) = entry_of(&pool, "Places/Lighthouse.md").await;
    let second = rebuild(&app).await;
    assert_eq!(second["unchanged"], SAMPLE_NOTES - 1, "{second}");
    assert_eq!(second["added"], 0);
    assert_eq!(
        entry_of(&pool, "Places/Lighthouse.md").await,
        (lighthouse, version)
    );
    let events: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE type = 'corpus.rebuilt'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(events, 1);

    // One note changed, one gone, one new.
    std::fs::write(
        root.join("Places/Lighthouse.md"),
        "---\ntitle: The lighthouse\npublish: true\n---\nRepainted red and white. See [[Harbour]].\n",
    )
    .unwrap();
    let (ferry, _) = entry_of(&pool, "Places/Ferry times.md").await;
    std::fs::remove_file(root.join("Places/Ferry times.md")).unwrap();
    std::fs::write(
        root.join("Places/Beach.md"),
        "---\npublish: true\n---\n# The beach\n\nSand.\n",
    )
    .unwrap();
    let third = rebuild(&app).await;
    assert_eq!(
        (
            third["added"].as_u64(),
            third["updated"].as_u64(),
            third["removed"].as_u64()
        ),
        (Some(1), Some(1), Some(1)),
        "{third}"
    );
    assert_eq!(
        entry_of(&pool, "Places/Lighthouse.md").await,
        (lighthouse, version + 1)
    );
    let gone: i64 = sqlx::query_scalar("SELECT count(*) FROM corpus_entries WHERE id = $1")
        .bind(ferry)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(gone, 0);
    let kept: String = sqlx::query_scalar("SELECT title FROM corpus_entries WHERE id = $1")
        .bind(by_hand.id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(kept, "Written by hand");
    let last: Value = sqlx::query_scalar(
        "SELECT data FROM events WHERE type = 'corpus.rebuilt' ORDER BY id DESC LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        last,
        json!({ "job_id": third["job_id"], "added": 1, "updated": 1, "removed": 1 })
    );

    // corpus.rebuild_result answers the same, and the index follows: the new text is found.
    let again = structured(
        &app.call_tool(
            "corpus.rebuild_result",
            json!({ "job_id": third["job_id"] }),
        )
        .await,
    );
    assert_eq!(again, third);
    let (harbour, _) = entry_of(&pool, "Places/Harbour.md").await;
    let hits = |q: &'static str| {
        let app = &app;
        async move {
            app.get(&format!("/api/search?q={q}")).await.json()["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|hit| hit["id"].as_i64().unwrap())
                .collect::<Vec<i64>>()
        }
    };
    wait_until(Duration::from_secs(10), || async {
        hits("repainted").await == [lighthouse]
    })
    .await;
    // The entry page links [[Harbour]] to its entry.
    let page = app.get(&format!("/entries/{lighthouse}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body
            .contains(&format!(r#"<a href="/entries/{harbour}""#)),
        "{}",
        page.body
    );
}

#[sqlx::test(migrations = false)]
async fn wikilinks_resolve_by_path_and_alias_and_restricted_ones_stay_text_for_a_visitor(
    pool: PgPool,
) {
    crate::common::schema(&pool).await;
    let (_dir, root) = sample_vault();
    let app = vault_app(&pool, &root).await;
    rebuild(&app).await;
    let (home, _) = entry_of(&pool, "Home.md").await;
    let (soup, _) = entry_of(&pool, "Recipes/Fish soup.md").await;
    let (tokyo, _) = entry_of(&pool, "東京.md").await;
    all_indexed(&pool).await;
    let page = app.get(&format!("/entries/{home}")).await.body;
    assert!(
        page.contains(&format!(r#"href="/entries/{soup}""#)),
        "by path: {page}"
    );
    assert!(
        page.contains(&format!(r#"href="/entries/{tokyo}""#)),
        "by name: {page}"
    );
    assert!(!page.contains("Remember to tidy"), "comments are dropped");
    // The harbour master is restricted: a visitor without a code sees the name only.
    let (master, _) = entry_of(&pool, "Contacts/Harbour master.md").await;
    let (baker, _) = entry_of(&pool, "Contacts/Baker.md").await;
    sqlx::query(
        "UPDATE corpus_entries SET body = body || E'\\n\\nAsk [[Harbour master]].' WHERE id = $1",
    )
    .bind(baker)
    .execute(&pool)
    .await
    .unwrap();
    // (The page reads the indexed version: index it again.)
    let version: i64 = sqlx::query_scalar(
        "UPDATE corpus_entries SET version = version + 1 WHERE id = $1 RETURNING version",
    )
    .bind(baker)
    .fetch_one(&pool)
    .await
    .unwrap();
    corpus::reindex_lagging(&pool, &jobs_client(&pool))
        .await
        .unwrap();
    wait_until(Duration::from_secs(10), || async {
        let indexed: i64 =
            sqlx::query_scalar("SELECT version FROM corpus_index WHERE entry_id = $1")
                .bind(baker)
                .fetch_one(&pool)
                .await
                .unwrap();
        indexed == version
    })
    .await;
    let page = app.get(&format!("/entries/{baker}")).await.body;
    assert!(page.contains("Ask Harbour master."), "{page}");
    assert!(
        !page.contains(&format!(r#"href="/entries/{master}""#)),
        "{page}"
    );
}

#[sqlx::test(migrations = false)]
async fn the_watcher_queues_a_rebuild_when_a_note_is_written(pool: PgPool) {
    crate::common::schema(&pool).await;
    let (_dir, root) = sample_vault();
    let app = vault_app(&pool, &root).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let watching = watch_vault(&pool, &root, &stop).await;
    // Obsidian's own folder changes all the time: no rebuild for that.
    std::fs::write(root.join(".obsidian/workspace.json"), "{}").unwrap();
    tokio::time::sleep(corpus::vault::watch::WATCH_DEBOUNCE * 3).await;
    let rebuilds = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM jobs WHERE kind = 'corpus.vault_rebuild'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    assert_eq!(rebuilds().await, 0);
    std::fs::write(root.join("New note.md"), "# New\n\nWritten while watched.").unwrap();
    wait_until(Duration::from_secs(5), || async { rebuilds().await >= 1 }).await;
    wait_until(Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM corpus_vault_notes WHERE path = 'New note.md'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
            == 1
    })
    .await;
    stop.cancel();
    watching.await.unwrap();
    drop(app);
}

#[sqlx::test(migrations = false)]
async fn without_a_vault_the_rebuild_tools_say_so_and_a_bad_job_id_is_refused(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .spawn()
        .await;
    let answer = app.call_tool("corpus.rebuild", json!({})).await;
    assert_eq!(answer["isError"], json!(true));
    assert!(
        structured(&answer)["error"]
            .as_str()
            .unwrap()
            .contains("No vault is set"),
        "{answer}"
    );
    let unknown = app
        .call_tool("corpus.rebuild_result", json!({ "job_id": 424242 }))
        .await;
    assert_eq!(unknown["isError"], json!(true), "{unknown}");
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(jobs, 0, "nothing queued");
}

#[sqlx::test(migrations = false)]
async fn a_flood_of_changes_makes_few_rebuilds_one_at_a_time_and_loses_no_note(pool: PgPool) {
    crate::common::schema(&pool).await;
    let (_dir, root) = sample_vault();
    let app = vault_app(&pool, &root).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let watching = watch_vault(&pool, &root, &stop).await;
    // 10,000 notes written as fast as the disk takes them (about a second here).
    const FLOOD: usize = 10_000;
    let flood_root = root.clone();
    tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(flood_root.join("flood")).unwrap();
        for n in 0..FLOOD {
            std::fs::write(
                flood_root.join(format!("flood/Note {n}.md")),
                format!("# Flood {n}\n\nWave {n}."),
            )
            .unwrap();
        }
    })
    .await
    .unwrap();
    // Every note arrives (the broken sample note aside), with no rebuild failing.
    wait_until(Duration::from_secs(120), || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM corpus_vault_notes")
            .fetch_one(&pool)
            .await
            .unwrap()
            == FLOOD as i64 + SAMPLE_NOTES as i64 - 1
    })
    .await;
    stop.cancel();
    watching.await.unwrap();
    let runs: Vec<String> = sqlx::query_scalar(
        "SELECT state::text FROM jobs WHERE kind = 'corpus.vault_rebuild' ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(
        (1..=6).contains(&runs.len()),
        "a burst is a few rebuilds, not one per file: {runs:?}"
    );
    assert!(runs.iter().all(|state| state != "discarded"), "{runs:?}");
    drop(app);
}

/// A vault of `notes` small notes in a temporary folder.
fn vault_of(notes: usize) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    std::fs::create_dir_all(root.join("many")).unwrap();
    for n in 0..notes {
        std::fs::write(
            root.join(format!("many/Note {n}.md")),
            format!("---\ntitle: Note {n}\npublish: true\n---\nThe text of note {n}."),
        )
        .unwrap();
    }
    (dir, root)
}

async fn state_and_attempt(pool: &PgPool, job: i64) -> (String, i16, i64) {
    sqlx::query_as(
        "SELECT state::text, attempt, jsonb_array_length(errors)::bigint FROM jobs WHERE id = $1",
    )
    .bind(job)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrations = false)]
async fn a_rebuild_asked_for_during_a_long_rebuild_is_queued_and_both_finish_without_a_deadlock(
    pool: PgPool,
) {
    crate::common::schema(&pool).await;
    let (_dir, root) = vault_of(5_000);
    let app = vault_app(&pool, &root).await;
    let first = corpus::vault::queue_rebuild(&pool, &jobs_client(&pool))
        .await
        .unwrap();
    // The first rebuild shows `running` (its claim is written), holds its lock and reads
    // the vault (seconds for 5,000 notes).
    wait_until(Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, bool>(
            "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND granted)
                AND EXISTS (SELECT FROM jobs WHERE id = $1 AND state = 'running')",
        )
        .bind(first.id.0)
        .fetch_one(&pool)
        .await
        .unwrap()
    })
    .await;
    // A note saved meanwhile: the watcher, the button or the tool asks for a rebuild.
    std::fs::write(
        root.join("Saved during.md"),
        "# Saved during\n\nLate words.",
    )
    .unwrap();
    let second = corpus::vault::queue_rebuild(&pool, &jobs_client(&pool))
        .await
        .unwrap();
    assert_ne!(
        second.id, first.id,
        "the running rebuild let the next one in"
    );
    assert!(!second.duplicate);

    for job in [first.id.0, second.id.0] {
        wait_until(Duration::from_secs(120), || async {
            let (state, _, _) = state_and_attempt(&pool, job).await;
            ["completed", "discarded", "cancelled"].contains(&state.as_str())
        })
        .await;
        assert_eq!(
            state_and_attempt(&pool, job).await,
            ("completed".to_string(), 1, 0),
            "job {job} ended in its first attempt, with no error (PostgreSQL ended no transaction)"
        );
    }
    let saved: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM corpus_vault_notes WHERE path = 'Saved during.md'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        saved, 1,
        "the note saved during the first rebuild is in the corpus"
    );
    drop(app);
}

#[sqlx::test(migrations = false)]
async fn hostile_notes_fail_alone_with_words_and_the_others_go_on(pool: PgPool) {
    crate::common::schema(&pool).await;
    let (_dir, root) = sample_vault();
    let mut bomb = String::from("---\ntitle: Bomb\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..9 {
        let items = vec![format!("*a{}", level - 1); 10].join(", ");
        bomb.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    bomb.push_str("---\nBoom.");
    std::fs::write(root.join("Bomb.md"), bomb).unwrap();
    std::fs::write(
        root.join("Nul title.md"),
        "---\ntitle: \"a\\0b\"\n---\nText.",
    )
    .unwrap();
    std::fs::write(
        root.join("Nul alias.md"),
        "---\naliases: [\"x\\u0000y\"]\n---\nText.",
    )
    .unwrap();
    std::fs::write(
        root.join("Deep.md"),
        format!(
            "---\nx: {}{}\n---\nText.",
            "[".repeat(10_000),
            "]".repeat(10_000)
        ),
    )
    .unwrap();
    nix::unistd::mkfifo(&root.join("Pipe.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::write(
        root.join("Comments.md"),
        "---\npublish: true\n---\n# Launch %%codename heron%%\n\nUse `printf(\"%d%%\")` here. %%the password is swordfish%% Visible words.",
    )
    .unwrap();
    let app = vault_app(&pool, &root).await;
    let answer = rebuild(&app).await;
    assert_eq!(answer["added"], SAMPLE_NOTES - 1 + 1, "{answer}");
    let failed = answer["failed"].as_array().unwrap();
    for (path, words) in [
        ("Bomb.md", "anchors or aliases"),
        ("Nul title.md", "control character U+0000"),
        ("Nul alias.md", "control character U+0000"),
        ("Deep.md", "deep"),
    ] {
        let listed: Vec<&Value> = failed.iter().filter(|f| f["path"] == path).collect();
        assert_eq!(listed.len(), 1, "{path} listed once: {failed:?}");
        let error = listed[0]["error"].as_str().unwrap();
        assert!(error.contains(words), "{path}: {error}");
    }
    assert!(
        failed.iter().all(|f| f["path"] != "Pipe.md"),
        "a FIFO is skipped: {failed:?}"
    );
    // The comments are nowhere: not in the title, the body, or a visitor's search.
    all_indexed(&pool).await;
    let (id, _) = entry_of(&pool, "Comments.md").await;
    let (title, body): (String, String) =
        sqlx::query_as("SELECT title, body FROM corpus_entries WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(title, "Launch");
    assert!(
        !body.contains("swordfish") && body.contains("%d%%"),
        "{body}"
    );
    for q in ["swordfish", "heron"] {
        let found = common::get(&app, &format!("/api/search?q={q}")).await;
        assert_eq!(found.status, StatusCode::OK);
        assert!(
            !found.body.contains(&format!("\"id\":{id}")),
            "{q}: {}",
            found.body
        );
    }
    let found = common::get(&app, "/api/search?q=visible").await;
    assert!(
        found.body.contains(&format!("\"id\":{id}")),
        "{}",
        found.body
    );
}

#[sqlx::test(migrations = false)]
async fn an_emptied_or_unmounted_vault_removes_nothing_and_says_why(pool: PgPool) {
    crate::common::schema(&pool).await;
    let (_dir, root) = sample_vault();
    let app = vault_app(&pool, &root).await;
    let first = rebuild(&app).await;
    assert_eq!(first["added"], SAMPLE_NOTES - 1);
    let entries = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM corpus_vault_notes")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let before = entries().await;
    // What an unmounted sync folder looks like: the folder is there, empty.
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            std::fs::remove_dir_all(path).unwrap();
        } else {
            std::fs::remove_file(path).unwrap();
        }
    }
    let answer = app.call_tool("corpus.rebuild", json!({})).await;
    assert_eq!(answer["isError"], json!(true), "{answer}");
    let text = answer.to_string();
    assert!(
        text.contains("holds no notes") && text.contains("Nothing was removed"),
        "{text}"
    );
    assert_eq!(entries().await, before, "no entry removed");
    let events: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE type = 'corpus.rebuilt'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(events, 1, "only the first rebuild called the hooks");
}

#[sqlx::test(migrations = false)]
async fn an_admins_edit_of_an_entry_made_from_a_note_is_refused_naming_the_note(pool: PgPool) {
    crate::common::schema(&pool).await;
    let (_dir, root) = sample_vault();
    let app = vault_app(&pool, &root).await;
    rebuild(&app).await;
    let (id, version) = entry_of(&pool, "Places/Harbour.md").await;
    for (tool, arguments) in [
        (
            "corpus.update",
            json!({"id": id, "title": "Edited by hand"}),
        ),
        ("corpus.promote", json!({"id": id})),
    ] {
        let answer = app.call_tool(tool, arguments).await;
        assert_eq!(answer["isError"], json!(true), "{tool}: {answer}");
        assert!(
            answer.to_string().contains("Places/Harbour.md"),
            "{tool}: {answer}"
        );
    }
    assert_eq!(
        entry_of(&pool, "Places/Harbour.md").await,
        (id, version),
        "nothing changed"
    );
}

/// The ids of `corpus.search`'s results for `q` (what any visitor finds).
async fn found_by_agent(app: &TestApp, q: &str) -> Vec<i64> {
    let answer = app.call_tool("corpus.search", json!({ "q": q })).await;
    structured(&answer)["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["id"].as_i64().unwrap())
        .collect()
}

#[sqlx::test(migrations = false)]
async fn a_notes_tags_are_shown_and_searchable_and_a_link_to_a_heading_lands_on_it(pool: PgPool) {
    crate::common::schema(&pool).await;
    let (_dir, root) = sample_vault();
    std::fs::write(
        root.join("Sailing.md"),
        "---\npublish: true\ntags: [seafaring, \"#bowline\"]\n---\n# Sailing\n\nRopes and sails.\n\n## Low tide, at six\n\nThe boats sit in the mud.\n",
    )
    .unwrap();
    std::fs::write(
        root.join("Ropes.md"),
        "---\npublish: true\n---\nSee [[Sailing#Low tide, at six|the tide]].\n",
    )
    .unwrap();
    let app = vault_app(&pool, &root).await;
    rebuild(&app).await;
    all_indexed(&pool).await;
    let (sailing, _) = entry_of(&pool, "Sailing.md").await;
    let (ropes, _) = entry_of(&pool, "Ropes.md").await;

    // Found by a tag that is nowhere in its words; the tag's `#` is not part of it.
    assert_eq!(found_by_agent(&app, "seafaring").await, [sailing]);
    assert_eq!(found_by_agent(&app, "bowline").await, [sailing]);

    // The entry page shows the tags, and the heading has the id the link names.
    let page = app.get(&format!("/entries/{sailing}")).await.body;
    assert!(page.contains(r#"data-testid="entry-tags""#), "{page}");
    assert!(
        page.contains("#seafaring") && page.contains("#bowline"),
        "{page}"
    );
    assert!(page.contains(r#"id="h-low-tide-at-six""#), "{page}");
    let page = app.get(&format!("/entries/{ropes}")).await.body;
    assert!(
        page.contains(&format!(r#"href="/entries/{sailing}#h-low-tide-at-six""#)),
        "{page}"
    );
}

/// The vault's watcher on `root`, once it watches.
async fn watch_vault(
    pool: &PgPool,
    root: &std::path::Path,
    stop: &tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let (status, task) = corpus::vault::watch::watch(
        pool.clone(),
        jobs_client(pool),
        root.to_path_buf(),
        stop.clone(),
    );
    let watching = tokio::time::timeout(
        Duration::from_secs(10),
        status.until(corpus::vault::watch::WatchState::Watching),
    )
    .await;
    assert!(
        watching == Ok(true),
        "the watcher did not watch: {:?}",
        status.get()
    );
    task
}

#[sqlx::test(migrations = false)]
async fn a_rebuild_that_failed_on_our_side_tells_the_agent_where_to_look_not_the_sql(pool: PgPool) {
    crate::common::schema(&pool).await;
    let (_dir, root) = sample_vault();
    let app = vault_app(&pool, &root).await;
    // A rebuild that ran out of attempts on an error of ours: its chain names SQL and a
    // path, which stay on the job (the admin's task page) and out of the tool's answer.
    let internal = "cannot write the corpus: error returned from database: relation \"corpus_vault_notes\" does not exist (at /srv/standmeet/vault)";
    let job_id: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (kind, queue, state, attempt, finalized_at, errors) \
         VALUES ('corpus.vault_rebuild', 'index', 'discarded', 3, now(), \
                 jsonb_build_array(jsonb_build_object('attempt', 3, 'at', now(), 'error', $1::text))) \
         RETURNING id",
    )
    .bind(internal)
    .fetch_one(&pool)
    .await
    .unwrap();
    let answer = app
        .call_tool("corpus.rebuild_result", json!({ "job_id": job_id }))
        .await;
    assert_eq!(answer["isError"], json!(true), "{answer}");
    let text = answer.to_string();
    assert!(
        !text.contains("relation") && !text.contains("/srv/standmeet"),
        "no SQL or path: {text}"
    );
    assert!(
        text.contains(&format!("/admin/tasks/{job_id}")),
        "where to look: {text}"
    );
    // The admin's corpus page shows the job's own error.
    sqlx::query(
        "INSERT INTO corpus_vault_rebuilds (only_row, last_job_id) VALUES (true, $1) \
         ON CONFLICT (only_row) DO UPDATE SET last_job_id = EXCLUDED.last_job_id",
    )
    .bind(job_id)
    .execute(&pool)
    .await
    .unwrap();
    let status = standmeet::ops::vault::status(&app.state, standmeet::ops::Operator::Agent)
        .await
        .unwrap()
        .expect("a vault is set");
    let error = status
        .last
        .expect("the newest rebuild")
        .error
        .unwrap_or_default();
    assert!(error.contains("does not exist"), "{error}");
}

#[sqlx::test(migrations = false)]
async fn a_rebuild_that_would_remove_most_of_the_vault_removes_nothing_until_allowed(pool: PgPool) {
    crate::common::schema(&pool).await;
    let (_dir, root) = sample_vault();
    let app = vault_app(&pool, &root).await;
    assert_eq!(rebuild(&app).await["added"], SAMPLE_NOTES - 1);
    let vault_entries = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM corpus_vault_notes")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let before = vault_entries().await;
    // A sync that brought back a third of the folders: 19 of the 30 notes are gone.
    for folder in ["Places", "Recipes", "Reading"] {
        std::fs::remove_dir_all(root.join(folder)).unwrap();
    }
    let held = rebuild(&app).await;
    assert_eq!(held["removed"], 0, "{held}");
    assert_eq!(held["would_remove"], 19, "{held}");
    assert_eq!(vault_entries().await, before, "nothing removed");
    // The corpus page says so and offers to go ahead.
    let status = standmeet::ops::vault::status(&app.state, standmeet::ops::Operator::Agent)
        .await
        .unwrap()
        .expect("a vault is set");
    let counts = status.last.unwrap().counts.unwrap();
    assert_eq!(counts.would_remove, 19);

    let answer = app
        .call_tool("corpus.rebuild", json!({ "allow_removals": true }))
        .await;
    let allowed = structured(&answer);
    assert_eq!(allowed["removed"], 19, "{allowed}");
    assert!(allowed.get("would_remove").is_none(), "{allowed}");
    assert_eq!(vault_entries().await, before - 19);
}
