//! The outward contract, kept in the repository: `docs/reference/`. Three of its files are
//! written from the code (the settings from the table `--help` prints, the MCP tools from
//! the golden tool list, the server functions from server_fn's registry) and must match
//! what the code would write now; `UPDATE_GOLDEN=1` rewrites them. `pages.md`, written
//! by hand, must name every route and test id the code has (`answers.md`, also by hand,
//! is read against the code in review). And no file points at a document the repository
//! does not hold: every markdown link, and every `docs/….md` path in any file, leads to
//! a file of the repository and to a heading of it when it names one.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::architecture::rust_files;
use serde_json::Value;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn reference_file(name: &str) -> PathBuf {
    repository().join("docs/reference").join(name)
}

/// Compares `docs/reference/<name>` with what the code says it should hold, after writing
/// it under `UPDATE_GOLDEN=1`.
fn kept_in_step(name: &str, written: &str) {
    let path = reference_file(name);
    if std::env::var("UPDATE_GOLDEN").is_ok() {
        std::fs::write(&path, written).unwrap();
    }
    let kept = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("docs/reference/{name} exists (UPDATE_GOLDEN=1 writes it)"));
    assert!(
        kept == written,
        "docs/reference/{name} is not what the code says; run this test with UPDATE_GOLDEN=1 \
         and commit the file"
    );
}

/// A table cell: one line, with the pipes that would end it escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

const GENERATED: &str = "Written from the code by `tests/it/reference.rs`: do not edit it by hand. After a \
change, `UPDATE_GOLDEN=1 cargo nextest run --test it reference` rewrites it.";

fn settings_reference() -> String {
    let mut text = format!(
        "# Settings\n\n{GENERATED}\n\nEvery setting StandMeet reads, in the order `standmeet --help` \
         lists them. All come from the environment; a bad value stops the start with a message \
         that names the setting. [Settings](../settings.md) explains them at more length.\n\n\
         | setting | when unset | meaning |\n|---|---|---|\n"
    );
    for setting in standmeet::config::SETTINGS {
        text.push_str(&format!(
            "| `{}` | {} | {} |\n",
            setting.name,
            cell(setting.when_unset.shown()),
            cell(setting.meaning)
        ));
    }
    text
}

#[test]
fn the_settings_reference_lists_every_setting_help_lists() {
    let written = settings_reference();
    assert!(written.contains("| `STANDMEET_MCP_TOKEN` |"));
    kept_in_step("settings.md", &written);
}

fn json_block(value: &Value) -> String {
    format!(
        "```json\n{}\n```\n",
        serde_json::to_string_pretty(value).unwrap()
    )
}

fn tools_reference(tools: &[Value]) -> String {
    let mut text = format!(
        "# MCP tools\n\n{GENERATED}\n\nThe tools `/mcp` offers (the answer to `tools/list`, kept in \
         `tests/golden/mcp_tools.json`), with what each takes and answers. Every answer comes as \
         `structuredContent` and as one text item; a tool error sets `isError` and answers \
         `{{\"error\": \"…\"}}` in words. With `STANDMEET_MCP_TOOL_NAMES=underscore` the same tools \
         are named with `_` for `.`. [Answers](answers.md) says what the shapes mean.\n\n\
         | tool | title | reads only | destructive | idempotent |\n|---|---|---|---|---|\n"
    );
    let hint = |tool: &Value, name: &str| match tool["annotations"][name].as_bool() {
        Some(true) => "yes",
        Some(false) => "no",
        None => "—",
    };
    for tool in tools {
        let name = tool["name"].as_str().unwrap();
        text.push_str(&format!(
            "| [`{name}`](#{}) | {} | {} | {} | {} |\n",
            name.replace('.', ""),
            cell(tool["title"].as_str().unwrap_or("")),
            hint(tool, "readOnlyHint"),
            hint(tool, "destructiveHint"),
            hint(tool, "idempotentHint"),
        ));
    }
    for tool in tools {
        text.push_str(&format!(
            "\n## {}\n\n{}\n\nTakes:\n\n{}\nAnswers:\n\n{}",
            tool["name"].as_str().unwrap(),
            tool["description"].as_str().unwrap_or(""),
            json_block(&tool["inputSchema"]),
            json_block(&tool["outputSchema"]),
        ));
    }
    text
}

#[test]
fn the_tools_reference_lists_every_mcp_tool_with_what_it_takes_and_answers() {
    let golden = std::fs::read_to_string(repository().join("tests/golden/mcp_tools.json"))
        .expect("the golden tool list");
    let tools: Vec<Value> = serde_json::from_str(&golden).unwrap();
    assert!(tools.len() > 20, "{} tools", tools.len());
    let written = tools_reference(&tools);
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        assert!(written.contains(&format!("\n## {name}\n")), "{name}");
    }
    kept_in_step("mcp-tools.md", &written);
}

fn server_functions_reference() -> String {
    let mut text = format!(
        "# Server functions\n\n{GENERATED}\n\nThe pages' calls to the server, as server_fn registers \
         them. Each takes its arguments as a form (`application/x-www-form-urlencoded`) in a \
         POST body, or in the query of a GET. All but the few that visitors use answer 401 \
         without a signed-in admin, and a request that changes something is refused with 403 \
         when a browser marks it as coming from another site (see [Security](../security.md)). \
         Arguments that do not fit are answered 400 with words; \
         [Answers](answers.md) has the shapes.\n\n| path | method |\n|---|---|\n"
    );
    for function in standmeet::api::server_functions() {
        text.push_str(&format!(
            "| `{}` | {} |\n",
            function.path,
            if function.get { "GET" } else { "POST" }
        ));
    }
    text
}

#[test]
fn the_server_functions_reference_lists_every_server_function() {
    let functions = standmeet::api::server_functions();
    assert!(functions.len() > 50, "{} server functions", functions.len());
    let written = server_functions_reference();
    for function in &functions {
        assert!(written.contains(&format!("`{}`", function.path)));
    }
    kept_in_step("server-functions.md", &written);
}

/// The strings in `code` between each `opening` and the next `"`.
fn quoted_after(code: &str, opening: &str) -> Vec<String> {
    code.split(opening)
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(value, _)| value.to_string()))
        .collect()
}

/// Every route the server answers: the pages of `ui`'s router, the routes `startup` adds,
/// and `/mcp`.
fn routes() -> BTreeSet<String> {
    let read = |file: &str| std::fs::read_to_string(repository().join(file)).unwrap();
    let mut routes: BTreeSet<String> = quoted_after(&read("src/ui/mod.rs"), "path!(\"")
        .into_iter()
        .collect();
    routes.extend(quoted_after(&read("src/startup.rs"), ".route(\""));
    routes.insert("/mcp".to_string());
    routes
}

/// Every test id the pages carry: written as `data-testid="…"`, handed to a component as
/// `test_id="…"`, or chosen between two (`"admin-menu-button"`) in the layout.
fn test_ids() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&repository().join("src/ui"), &mut files);
    let mut ids = BTreeSet::new();
    for file in files {
        let code = std::fs::read_to_string(&file).unwrap();
        ids.extend(quoted_after(&code, "data-testid=\""));
        ids.extend(quoted_after(&code, "test_id=\""));
        for line in code
            .lines()
            .filter(|line| line.contains("data-testid=move"))
        {
            ids.extend(line.split('"').skip(1).step_by(2).map(|id| id.to_string()));
        }
    }
    ids
}

#[test]
fn the_pages_reference_names_every_route_and_test_id() {
    let routes = routes();
    for known in [
        "/admin/tasks/:id",
        "/healthz",
        "/api/live",
        "/search",
        "/mcp",
    ] {
        assert!(routes.contains(known), "{known} in {routes:?}");
    }
    let ids = test_ids();
    for known in [
        "task-row",
        "job-state",
        "admin-menu-button",
        "request-mail-state",
    ] {
        assert!(ids.contains(known), "{known} in {ids:?}");
    }
    let pages = std::fs::read_to_string(reference_file("pages.md")).expect("pages.md");
    let missing: Vec<&String> = routes
        .iter()
        .chain(&ids)
        .filter(|name| !pages.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/reference/pages.md does not name {missing:?} (in backticks)"
    );
}

/// Files the search below leaves alone: what is built, fetched or installed, not written.
fn kept_by_git(path: &Path) -> bool {
    let name = path.file_name().unwrap().to_string_lossy();
    !matches!(
        name.as_ref(),
        ".git" | "target" | "node_modules" | "test-results" | "playwright-report" | ".standmeet"
    )
}

fn text_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if !kept_by_git(&path) {
            continue;
        }
        if path.is_dir() {
            text_files(&path, found);
        } else {
            let extension = path.extension().and_then(|extension| extension.to_str());
            let written = [
                "rs", "md", "ts", "mjs", "sql", "json", "toml", "sh", "yml", "js", "css", "html",
            ]
            .iter()
            .any(|known| extension == Some(known));
            // The scripts have no extension.
            if written
                || path
                    .parent()
                    .is_some_and(|parent| parent.ends_with("scripts"))
            {
                found.push(path);
            }
        }
    }
}

/// Landed migrations that name the outside document in a comment. They are append-only:
/// sqlx keeps a checksum of a migration's whole text, comments and all, so changing a
/// word would stop every database that ran it. No other file may name it.
const LANDED_MIGRATIONS_THAT_NAME_IT: &[&str] = &[
    "crates/standmeet-jobs/migrations/20261202000004_job_claims.sql",
    "crates/standmeet-jobs/migrations/20261203000002_unique_jobs.sql",
    "crates/standmeet-jobs/migrations/20261203000003_job_schedules.sql",
    "migrations/20261201000006_bookings.sql",
    "migrations/20261203000004_corpus_vault.sql",
    "migrations/20261204000001_wikilink_lookups.sql",
];

#[test]
fn no_file_points_at_a_document_the_repository_does_not_hold() {
    let root = repository().canonicalize().unwrap();
    // Spelled in two halves so that this file does not name it.
    let outside = ["product", ".md"].concat();
    let mut files = Vec::new();
    text_files(&root, &mut files);
    assert!(files.len() > 100, "{} files", files.len());
    let mut naming = Vec::new();
    let mut broken = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap();
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let shown = relative.display().to_string();
        if text.contains(&outside) && !LANDED_MIGRATIONS_THAT_NAME_IT.contains(&shown.as_str()) {
            naming.push(shown.clone());
        }
        let mut targets: Vec<(PathBuf, &str)> = docs_paths(&text)
            .into_iter()
            .map(|target| (root.join(target), target))
            .collect();
        if relative
            .extension()
            .is_some_and(|extension| extension == "md")
        {
            // Addresses with a scheme (https:, mailto:, and the sample vault's hostile
            // javascript:) lead out on purpose.
            targets.extend(
                markdown_links(&text)
                    .into_iter()
                    .filter(|target| !target.contains(':') && !target.starts_with('#'))
                    .map(|target| (file.parent().unwrap().join(target), target)),
            );
        }
        for (joined, target) in targets {
            if let Err(why) = leads_somewhere(&root, &joined) {
                broken.push(format!("{shown} → {target}: {why}"));
            }
        }
    }
    assert!(
        naming.is_empty(),
        "these name a document outside the repository: {naming:?}"
    );
    assert!(
        broken.is_empty(),
        "these lead nowhere in the repository: {broken:#?}"
    );
}

/// Whether `target` (a path, perhaps with `#heading`) is a file of the repository, and,
/// when it names a heading, a markdown file with that heading.
fn leads_somewhere(root: &Path, target: &Path) -> Result<(), &'static str> {
    let target = target.to_string_lossy();
    let (path, heading) = match target.split_once('#') {
        Some((path, heading)) => (path, Some(heading)),
        None => (target.as_ref(), None),
    };
    let Ok(resolved) = Path::new(path).canonicalize() else {
        return Err("no such file");
    };
    if !resolved.starts_with(root) {
        return Err("outside the repository");
    }
    if let Some(heading) = heading {
        let text = std::fs::read_to_string(&resolved).map_err(|_| "not a text file")?;
        if !heading_anchors(&text)
            .iter()
            .any(|anchor| anchor == heading)
        {
            return Err("no such heading");
        }
    }
    Ok(())
}

/// The anchors a markdown renderer gives a text's headings: lowercase, spaces as `-`,
/// punctuation other than `-` and `_` left out.
fn heading_anchors(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| line.starts_with('#'))
        .map(|line| {
            line.trim_start_matches('#')
                .trim()
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect::<String>()
                .to_lowercase()
        })
        .collect()
}

/// The targets of the `[text](target)` links in a markdown text.
fn markdown_links(text: &str) -> Vec<&str> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(target, _)| target))
        .filter(|target| !target.contains(' '))
        .collect()
}

/// The paths below the repository's `docs/` that a text names (`docs/jobs.md#queues`),
/// wherever it does: comments, strings, prose.
fn docs_paths(text: &str) -> Vec<&str> {
    let in_path = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-' | '#');
    let mut found = Vec::new();
    for (at, _) in text.match_indices("docs/") {
        if text[..at].chars().next_back().is_some_and(in_path) {
            continue; // part of a longer path
        }
        let rest = &text[at..];
        let end = rest.find(|c: char| !in_path(c)).unwrap_or(rest.len());
        let path = rest[..end].trim_end_matches(['.', '#']);
        if path
            .split('#')
            .next()
            .is_some_and(|file| file.ends_with(".md"))
        {
            found.push(path);
        }
    }
    found
}

#[test]
fn the_link_reader_finds_links_and_their_targets() {
    assert_eq!(
        markdown_links("see [Settings](../settings.md#mail) and [x](https://a.b) (not](this"),
        vec!["../settings.md#mail", "https://a.b"]
    );
    assert_eq!(
        quoted_after(r#"a path!("/x") b path!("/y")"#, "path!(\""),
        vec!["/x", "/y"]
    );
    assert_eq!(
        docs_paths("see docs/jobs.md#the-tasks-panel. Not end2end/docs/x.md, nor docs/a.png"),
        vec!["docs/jobs.md#the-tasks-panel"]
    );
    assert_eq!(
        heading_anchors("# Jobs\n## The Tasks panel\n### The overview (`/admin`)\ntext"),
        vec!["jobs", "the-tasks-panel", "the-overview-admin"]
    );
}
