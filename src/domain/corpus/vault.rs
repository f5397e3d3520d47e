//! The corpus from an Obsidian vault (product.md §12): the `corpus.vault_rebuild` job
//! reads every note under `STANDMEET_VAULT` and brings the entries it made in line with
//! them, in one transaction; what changed is recorded as the event `corpus.rebuilt`
//! (the post-build hooks are the webhook endpoints subscribed to it).
//!
//! - A note is a `*.md` file anywhere under the vault but in dot-folders (`.obsidian/`,
//!   `.trash/`, …). Its identity is its path in the vault (`corpus_vault_notes`): new
//!   notes are added, changed ones (by their SHA-256) updated, unchanged ones cost
//!   nothing and keep their version, and entries whose note is gone are removed.
//!   Entries made elsewhere have no note and are never touched.
//! - No link is followed: a symbolic link is neither descended into nor read (it is
//!   listed as failed), and a file is opened with `O_NOFOLLOW`, so nothing outside the
//!   vault is read whatever the vault holds.
//! - Front matter (YAML, read by gray_matter): `title` (else the first `# ` heading,
//!   else the file name), `publish: true` (promoted; else a draft), `visibility:
//!   restricted` (else public), `tags`, `aliases` (what wikilinks also resolve by).
//! - A note that is over 1 MB, not UTF-8, holds NUL bytes, has broken front matter or
//!   does not fit an entry is listed in `failed` with its path and reason; the rest go on.
//! - One rebuild at a time: its unique key keeps one waiting, and a transaction-level
//!   advisory lock makes a second one (the next, queued while the first ran) wait for it.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use super::index::queue_index_batches;
use super::{MAX_BODY_CHARS, MAX_TITLE_CHARS, Status, Visibility};
use crate::domain::events::{self, NewEvent};
use standmeet_jobs::{self as jobs, Inserted, JobContext, JobError, JobId, JobKind};

/// The largest note read; a larger one is listed as failed.
pub const MAX_NOTE_BYTES: u64 = 1024 * 1024;

/// The rebuild's unique key: at most one waits.
pub const REBUILD_KEY: &str = "corpus.vault_rebuild";

/// A note, read and understood.
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    /// Its path in the vault, `/`-separated.
    pub path: String,
    /// Its file name without `.md`, lowercased: what `[[wikilinks]]` name it by.
    pub name: String,
    pub hash: String,
    pub title: String,
    pub body: String,
    pub status: Status,
    pub visibility: Visibility,
    pub tags: Vec<String>,
    pub aliases: Vec<String>,
}

/// A note that was not imported, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedNote {
    pub path: String,
    pub error: String,
}

/// What a walk of the vault found.
#[derive(Debug, Default)]
pub struct Scan {
    pub notes: Vec<Note>,
    pub failed: Vec<FailedNote>,
    /// Every note's path, the failed ones' too: an entry whose note failed this time
    /// stays as it was, it is not removed.
    pub seen: HashSet<String>,
}

/// Reads every note under `root` (blocking: run it off the async threads). Fails only
/// when `root` itself cannot be read.
pub fn scan(root: &Path) -> Result<Scan, String> {
    let mut found = Scan::default();
    let walk = walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|entry| {
            entry.depth() == 0 || !entry.file_name().to_string_lossy().starts_with('.')
        });
    for item in walk {
        let entry = match item {
            Ok(entry) => entry,
            Err(err) if err.depth() == 0 => {
                return Err(format!(
                    "the vault {} cannot be read: {err}",
                    root.display()
                ));
            }
            Err(err) => {
                let path = err
                    .path()
                    .and_then(|path| relative(root, path).ok())
                    .unwrap_or_default();
                found.failed.push(FailedNote {
                    path,
                    error: format!("cannot be read: {err}"),
                });
                continue;
            }
        };
        if entry.file_type().is_dir() {
            continue;
        }
        let is_note = entry
            .file_name()
            .to_string_lossy()
            .to_lowercase()
            .ends_with(".md");
        if !is_note {
            continue;
        }
        let path = match relative(root, entry.path()) {
            Ok(path) => path,
            Err(error) => {
                found.failed.push(FailedNote {
                    path: entry.path().to_string_lossy().into_owned(),
                    error,
                });
                continue;
            }
        };
        found.seen.insert(path.clone());
        let read = if entry.path_is_symlink() {
            Err("is a symbolic link; StandMeet follows no link, so nothing outside the vault is read".to_string())
        } else {
            read_capped(entry.path()).and_then(|bytes| parse_note(&path, &bytes))
        };
        match read {
            Ok(note) => found.notes.push(note),
            Err(error) => found.failed.push(FailedNote { path, error }),
        }
    }
    Ok(found)
}

/// `path` relative to `root`, `/`-separated; its name must be UTF-8.
fn relative(root: &Path, path: &Path) -> Result<String, String> {
    let inside = path.strip_prefix(root).unwrap_or(path);
    let parts: Option<Vec<&str>> = inside.iter().map(|part| part.to_str()).collect();
    parts
        .map(|parts| parts.join("/"))
        .ok_or_else(|| "its name is not UTF-8".to_string())
}

/// The file's bytes, opened without following a link, and at most one byte more than
/// a note may have (a 50 MB file costs no more than that to refuse).
fn read_capped(path: &Path) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
        .map_err(|err| format!("cannot be read: {err}"))?;
    let size = file.metadata().map(|meta| meta.len()).unwrap_or(0);
    if size > MAX_NOTE_BYTES {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(MAX_NOTE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("cannot be read: {err}"))?;
    if bytes.len() as u64 > MAX_NOTE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

fn too_large(size: u64) -> String {
    format!(
        "is {:.1} MB; a note is at most 1 MB",
        size as f64 / (1024.0 * 1024.0)
    )
}

/// One note from its bytes: front matter, title, body, and the entry it makes.
pub fn parse_note(path: &str, bytes: &[u8]) -> Result<Note, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_string())?;
    if text.contains('\0') {
        return Err("contains NUL bytes, which an entry cannot hold".into());
    }
    let file_name = path.rsplit('/').next().unwrap_or(path);
    let stem = &file_name[..file_name.len().saturating_sub(3)];
    let (front, body) = front_matter(text)?;
    let text_field = |key: &str| -> Result<Option<String>, String> {
        match front.get(key) {
            None | Some(gray_matter::Pod::Null) => Ok(None),
            Some(gray_matter::Pod::String(value)) => Ok(Some(value.trim().to_string())),
            Some(other) => Err(format!(
                "its front matter's {key} is {}, not text",
                pod_kind(other)
            )),
        }
    };
    let title = match text_field("title")?.filter(|title| !title.is_empty()) {
        Some(title) => title,
        None => first_heading(&body).unwrap_or_else(|| stem.trim().to_string()),
    };
    if title.chars().count() > MAX_TITLE_CHARS {
        return Err(format!(
            "its title is {} characters; an entry's is at most {MAX_TITLE_CHARS}",
            title.chars().count()
        ));
    }
    if title.is_empty() {
        return Err("has no title, heading or file name to take one from".into());
    }
    if body.chars().count() > MAX_BODY_CHARS {
        return Err(format!(
            "its text is {} characters; an entry holds at most {MAX_BODY_CHARS}",
            body.chars().count()
        ));
    }
    let status = match front.get("publish") {
        None | Some(gray_matter::Pod::Null) | Some(gray_matter::Pod::Boolean(false)) => {
            Status::Draft
        }
        Some(gray_matter::Pod::Boolean(true)) => Status::Promoted,
        Some(other) => {
            return Err(format!(
                "its front matter's publish is {}; write publish: true or publish: false",
                pod_kind(other)
            ));
        }
    };
    let visibility = match text_field("visibility")?.as_deref() {
        None | Some("public") => Visibility::Public,
        Some("restricted") => Visibility::Restricted,
        Some(other) => {
            return Err(format!(
                "its front matter's visibility is \"{other}\"; write public or restricted"
            ));
        }
    };
    Ok(Note {
        path: path.to_string(),
        name: stem.trim().to_lowercase(),
        hash: hex(&Sha256::digest(bytes)),
        title,
        body,
        status,
        visibility,
        tags: words(front.get("tags"))
            .into_iter()
            .map(|tag| tag.trim_start_matches('#').to_string())
            .collect(),
        aliases: words(front.get("aliases"))
            .into_iter()
            .map(|alias| alias.to_lowercase())
            .collect(),
    })
}

/// The front matter's fields (none without front matter) and the text after it.
fn front_matter(text: &str) -> Result<(HashMap<String, gray_matter::Pod>, String), String> {
    let opens = text
        .lines()
        .next()
        .is_some_and(|line| line.trim_end() == "---");
    if !opens {
        return Ok((HashMap::new(), text.to_string()));
    }
    // gray_matter takes an unclosed block for the whole note: say so instead.
    if !text.lines().skip(1).any(|line| line.trim_end() == "---") {
        return Err("its front matter is not closed by a line of ---".into());
    }
    let parsed = gray_matter::Matter::<gray_matter::engine::YAML>::new()
        .parse::<gray_matter::Pod>(text)
        .map_err(|err| format!("its front matter is not valid YAML: {err}"))?;
    let fields = match parsed.data {
        None | Some(gray_matter::Pod::Null) => HashMap::new(),
        Some(gray_matter::Pod::Hash(fields)) => fields,
        Some(other) => {
            return Err(format!(
                "its front matter is {}, not a set of fields such as title: …",
                pod_kind(&other)
            ));
        }
    };
    Ok((fields, parsed.content))
}

fn pod_kind(pod: &gray_matter::Pod) -> &'static str {
    match pod {
        gray_matter::Pod::Null => "empty",
        gray_matter::Pod::String(_) => "text",
        gray_matter::Pod::Integer(_) | gray_matter::Pod::Float(_) => "a number",
        gray_matter::Pod::Boolean(_) => "true or false",
        gray_matter::Pod::Array(_) => "a list",
        gray_matter::Pod::Hash(_) => "a set of fields",
    }
}

/// A front matter field that is a word or a list of words (Obsidian writes both).
fn words(pod: Option<&gray_matter::Pod>) -> Vec<String> {
    let one = |pod: &gray_matter::Pod| match pod {
        gray_matter::Pod::String(word) => Some(word.trim().to_string()),
        gray_matter::Pod::Integer(n) => Some(n.to_string()),
        _ => None,
    };
    match pod {
        Some(gray_matter::Pod::Array(items)) => items.iter().filter_map(one).collect(),
        Some(gray_matter::Pod::String(text)) => text
            .split(',')
            .map(|word| word.trim().to_string())
            .collect(),
        _ => Vec::new(),
    }
    .into_iter()
    .filter(|word| !word.is_empty())
    .collect()
}

/// The text of the first level-one heading, if the note has one.
fn first_heading(markdown: &str) -> Option<String> {
    use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};
    let mut inside = false;
    let mut heading = String::new();
    for event in Parser::new(markdown) {
        match event {
            Event::Start(Tag::Heading {
                level: HeadingLevel::H1,
                ..
            }) => inside = true,
            Event::End(TagEnd::Heading(HeadingLevel::H1)) if inside => break,
            Event::Text(text) | Event::Code(text) if inside => heading.push_str(&text),
            _ => {}
        }
    }
    let heading = heading.trim().to_string();
    (!heading.is_empty()).then_some(heading)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// What a rebuild did: its job's output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebuildOutput {
    pub added: u64,
    pub updated: u64,
    pub removed: u64,
    pub unchanged: u64,
    pub failed: Vec<FailedNote>,
    pub index_job_ids: Vec<JobId>,
}

/// Queues a rebuild, or finds the one waiting; records it as the newest.
pub async fn queue_rebuild(pool: &PgPool) -> Result<Inserted, super::CorpusError> {
    let mut tx = pool.begin().await?;
    let inserted = jobs::insert_unique::<VaultRebuild>(
        &mut tx,
        &RebuildArgs {},
        REBUILD_KEY,
        jobs::InsertOptions::default(),
    )
    .await?;
    sqlx::query!(
        r#"
        INSERT INTO corpus_vault_rebuilds (only_row, last_job_id) VALUES (true, $1)
        ON CONFLICT (only_row) DO UPDATE SET last_job_id = EXCLUDED.last_job_id, queued_at = now()
        "#,
        inserted.id.0
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(inserted)
}

/// The newest rebuild's job, if one was ever queued.
pub async fn last_rebuild(pool: &PgPool) -> Result<Option<JobId>, sqlx::Error> {
    Ok(
        sqlx::query_scalar!("SELECT last_job_id FROM corpus_vault_rebuilds")
            .fetch_optional(pool)
            .await?
            .flatten()
            .map(JobId),
    )
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RebuildArgs {}

/// `corpus.vault_rebuild`: the corpus brought in line with the vault at `root`.
pub struct VaultRebuild {
    pub root: Option<PathBuf>,
}

impl JobKind for VaultRebuild {
    const KIND: &'static str = "corpus.vault_rebuild";
    const QUEUE: &'static str = "index";
    const MAX_ATTEMPTS: i16 = 3;
    const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
    /// A note saved while a rebuild runs must be read by another one: the running
    /// rebuild lets the next in (the advisory lock keeps them one after the other).
    const UNIQUE_WHILE_RUNNING: bool = false;
    type Args = RebuildArgs;
    type Output = RebuildOutput;

    async fn run(&self, job: JobContext, _args: RebuildArgs) -> Result<RebuildOutput, JobError> {
        let Some(root) = self.root.clone() else {
            return Err(JobError::discard(
                "no vault is set (STANDMEET_VAULT) in the process that ran this rebuild",
            ));
        };
        let mut tx = job.pool().begin().await?;
        // One rebuild at a time, across processes; the scan comes after the lock, so
        // the later rebuild reads what the earlier one did not.
        sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('corpus.vault_rebuild'))")
            .execute(&mut *tx)
            .await?;
        // The page shows the newest rebuild, however it was queued (a schedule's too).
        sqlx::query!(
            r#"
            INSERT INTO corpus_vault_rebuilds (only_row, last_job_id) VALUES (true, $1)
            ON CONFLICT (only_row) DO UPDATE
            SET last_job_id = greatest(corpus_vault_rebuilds.last_job_id, EXCLUDED.last_job_id)
            "#,
            job.id.0
        )
        .execute(&mut *tx)
        .await?;
        let found = tokio::task::spawn_blocking(move || scan(&root))
            .await
            .map_err(|err| JobError::retry(format!("the vault's scan stopped: {err}")))?
            .map_err(JobError::retry)?;
        let output = apply(&mut tx, found).await?;
        if output.added + output.updated + output.removed > 0 {
            let rebuilt =
                NewEvent::corpus_rebuilt(job.id.0, output.added, output.updated, output.removed);
            events::record(&mut tx, &rebuilt).await?;
        }
        job.complete_tx(&mut tx, &output).await?;
        tx.commit().await?;
        tracing::info!(
            added = output.added,
            updated = output.updated,
            removed = output.removed,
            unchanged = output.unchanged,
            failed = output.failed.len(),
            "the corpus was rebuilt from the vault"
        );
        Ok(output)
    }
}

/// Brings the vault's entries in line with `found`, in the rebuild's transaction.
async fn apply(tx: &mut sqlx::PgConnection, found: Scan) -> Result<RebuildOutput, JobError> {
    let known: HashMap<String, (i64, String)> =
        sqlx::query!("SELECT path, entry_id, content_hash FROM corpus_vault_notes")
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|row| (row.path, (row.entry_id, row.content_hash)))
            .collect();
    let mut output = RebuildOutput {
        failed: found.failed,
        ..Default::default()
    };
    let mut to_index = Vec::new();
    for note in found.notes {
        match known.get(&note.path) {
            Some((_, hash)) if *hash == note.hash => output.unchanged += 1,
            Some((entry_id, _)) => {
                sqlx::query!(
                    r#"
                    UPDATE corpus_entries
                    SET title = $2, body = $3, visibility = $4, status = $5,
                        version = version + 1, updated_at = now()
                    WHERE id = $1
                    "#,
                    entry_id,
                    note.title,
                    note.body,
                    note.visibility as Visibility,
                    note.status as Status,
                )
                .execute(&mut *tx)
                .await?;
                to_index.push(*entry_id);
                sqlx::query!(
                    r#"
                    UPDATE corpus_vault_notes
                    SET name = $2, aliases = $3, tags = $4, content_hash = $5, imported_at = now()
                    WHERE path = $1
                    "#,
                    note.path,
                    note.name,
                    &note.aliases,
                    &note.tags,
                    note.hash,
                )
                .execute(&mut *tx)
                .await?;
                output.updated += 1;
            }
            None => {
                let entry_id = sqlx::query_scalar!(
                    r#"
                    INSERT INTO corpus_entries (title, body, visibility, status)
                    VALUES ($1, $2, $3, $4) RETURNING id
                    "#,
                    note.title,
                    note.body,
                    note.visibility as Visibility,
                    note.status as Status,
                )
                .fetch_one(&mut *tx)
                .await?;
                to_index.push(entry_id);
                sqlx::query!(
                    r#"
                    INSERT INTO corpus_vault_notes (path, entry_id, name, aliases, tags, content_hash)
                    VALUES ($1, $2, $3, $4, $5, $6)
                    "#,
                    note.path,
                    entry_id,
                    note.name,
                    &note.aliases,
                    &note.tags,
                    note.hash,
                )
                .execute(&mut *tx)
                .await?;
                output.added += 1;
            }
        }
    }
    // Indexed in batches: one job per entry would cost a transaction each.
    output.index_job_ids = queue_index_batches(&mut *tx, &to_index).await?;
    let gone: Vec<i64> = known
        .iter()
        .filter(|(path, _)| !found.seen.contains(*path))
        .map(|(_, (entry_id, _))| *entry_id)
        .collect();
    if !gone.is_empty() {
        output.removed = sqlx::query!("DELETE FROM corpus_entries WHERE id = ANY($1)", &gone)
            .execute(&mut *tx)
            .await?
            .rows_affected();
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(path: &str, text: &str) -> Result<Note, String> {
        parse_note(path, text.as_bytes())
    }

    #[test]
    fn front_matter_names_the_title_publishing_visibility_tags_and_aliases() {
        let parsed = note(
            "Travel/Kyoto trip.md",
            "---\ntitle: Three days in Kyoto\npublish: true\nvisibility: restricted\ntags: [travel, \"#japan\"]\naliases:\n  - Kyoto\n  - 京都\n---\n# Ignored heading\n\nTemples.",
        )
        .unwrap();
        assert_eq!(parsed.title, "Three days in Kyoto");
        assert_eq!(parsed.status, Status::Promoted);
        assert_eq!(parsed.visibility, Visibility::Restricted);
        assert_eq!(parsed.tags, ["travel", "japan"]);
        assert_eq!(parsed.aliases, ["kyoto", "京都"]);
        assert_eq!(parsed.name, "kyoto trip");
        assert_eq!(parsed.body.trim(), "# Ignored heading\n\nTemples.");
        assert_eq!(parsed.hash.len(), 64);
    }

    #[test]
    fn without_front_matter_the_title_is_the_first_heading_else_the_file_name() {
        let headed = note("a/Notes.md", "Intro line\n\n# The *real* title\n\nText").unwrap();
        assert_eq!(headed.title, "The real title");
        assert_eq!(headed.status, Status::Draft);
        assert_eq!(headed.visibility, Visibility::Public);
        let plain = note("Plain note.md", "Just text.").unwrap();
        assert_eq!(plain.title, "Plain note");
    }

    #[test]
    fn a_bad_note_says_what_is_wrong() {
        for (text, words) in [
            ("---\ntitle: [unclosed\n---\nx", "not valid YAML"),
            ("---\ntitle: x\nno end", "not closed"),
            ("---\npublish: maybe\n---\nx", "publish"),
            ("---\nvisibility: secret\n---\nx", "visibility"),
            ("---\n- a\n- b\n---\nx", "a list"),
            ("text with a \0 in it", "NUL"),
        ] {
            let err = note("bad.md", text).unwrap_err();
            assert!(err.contains(words), "{text:?}: {err}");
        }
        let err = parse_note("latin1.md", &[0x66, 0xe9, 0x65]).unwrap_err();
        assert!(err.contains("UTF-8"), "{err}");
        let long = format!("# t\n\n{}", "x".repeat(MAX_BODY_CHARS + 1));
        assert!(note("long.md", &long).unwrap_err().contains("at most"));
    }

    #[test]
    fn the_scan_skips_dot_folders_and_other_files_follows_no_link_and_lists_what_failed() {
        let vault = tempfile::tempdir().unwrap();
        let root = vault.path();
        let write = |path: &str, text: &[u8]| {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("A.md", b"# A\n\nSee [[B]].");
        write("folder/B.md", b"B's text");
        write(".obsidian/workspace.md", b"not a note");
        write(".trash/Old.md", b"deleted");
        write("image.png", b"\x89PNG");
        write("big.md", &vec![b'x'; (MAX_NOTE_BYTES + 10) as usize]);
        std::os::unix::fs::symlink("/etc/hostname", root.join("etc.md")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etc-folder")).unwrap();
        let found = scan(root).unwrap();
        let paths: Vec<&str> = found.notes.iter().map(|n| n.path.as_str()).collect();
        assert_eq!(paths, ["A.md", "folder/B.md"]);
        let failed: Vec<(&str, &str)> = found
            .failed
            .iter()
            .map(|f| (f.path.as_str(), f.error.as_str()))
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(
            failed
                .iter()
                .any(|(p, e)| *p == "big.md" && e.contains("at most 1 MB"))
        );
        assert!(
            failed
                .iter()
                .any(|(p, e)| *p == "etc.md" && e.contains("symbolic link"))
        );
        assert!(found.seen.contains("big.md") && found.seen.contains("etc.md"));
        assert!(scan(&root.join("missing")).is_err());
    }
}

/// `corpus.rebuild`'s and `corpus.rebuild_result`'s answer: the counts once the rebuild
/// finished, else only its job and `pending`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RebuildAnswer {
    pub job_id: JobId,
    pub pending: bool,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub counts: Option<RebuildCounts>,
}

/// A finished rebuild's counts, as the tools answer them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RebuildCounts {
    pub added: u64,
    pub updated: u64,
    pub removed: u64,
    pub unchanged: u64,
    pub failed: Vec<FailedNote>,
}

/// Queues a rebuild (or finds the one waiting), waits up to `limit`, and answers.
pub async fn rebuild_and_wait(
    pool: &PgPool,
    jobs: &jobs::JobClient,
    vault: Option<&Path>,
    limit: std::time::Duration,
) -> Result<RebuildAnswer, super::CorpusError> {
    if vault.is_none() {
        return Err(super::CorpusError::NoVault);
    }
    let job = queue_rebuild(pool).await?.id;
    match jobs.wait(&[job], limit).await {
        Ok(jobs::WaitOutcome::Done(_)) | Ok(jobs::WaitOutcome::Receipt) => {}
        Err(err) => return Err(super::CorpusError::Internal(err.into())),
    }
    rebuild_result(jobs, job).await
}

/// What rebuild `job_id` did, or that it is still pending.
pub async fn rebuild_result(
    jobs: &jobs::JobClient,
    job_id: JobId,
) -> Result<RebuildAnswer, super::CorpusError> {
    let row = jobs
        .get(job_id)
        .await?
        .filter(|row| row.kind == VaultRebuild::KIND)
        .ok_or(super::CorpusError::NotARebuild(job_id.0))?;
    if !row.state.is_terminal() {
        return Ok(RebuildAnswer {
            job_id,
            pending: true,
            counts: None,
        });
    }
    let output: Option<RebuildOutput> = row
        .output
        .clone()
        .and_then(|output| serde_json::from_value(output).ok());
    match output {
        Some(output) if row.state == jobs::JobState::Completed => Ok(RebuildAnswer {
            job_id,
            pending: false,
            counts: Some(RebuildCounts {
                added: output.added,
                updated: output.updated,
                removed: output.removed,
                unchanged: output.unchanged,
                failed: output.failed,
            }),
        }),
        _ => Err(super::CorpusError::RebuildFailed {
            job_id: job_id.0,
            state: row.state.as_str(),
            reason: row
                .errors
                .as_array()
                .and_then(|errors| errors.last())
                .and_then(|last| last["error"].as_str())
                .map(|error| format!("Its last error: {error}"))
                .unwrap_or_default(),
        }),
    }
}

/// How long the watcher waits for changes to settle before it queues a rebuild: a
/// burst of saves (or 10,000 files copied in) is one rebuild.
pub const WATCH_DEBOUNCE: std::time::Duration = std::time::Duration::from_millis(500);

/// The longest a rebuild waits for changes to settle: one comes within 2 s of a change
/// even while the vault never stops changing.
const WATCH_SETTLE_AT_MOST: std::time::Duration = std::time::Duration::from_millis(1500);

/// Watches the vault at `root` (`STANDMEET_VAULT_WATCH`): a note or folder created,
/// changed, moved or removed anywhere but in a dot-folder (`.obsidian/` changes
/// whenever Obsidian is open) queues a rebuild. Files only read (as a rebuild reads
/// them) are not changes. Until `stop`.
pub fn watch(
    pool: PgPool,
    root: PathBuf,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    use anyhow::Context;
    use notify::{RecursiveMode, Watcher};
    let (changed, mut changes) = tokio::sync::mpsc::unbounded_channel::<()>();
    let watched_root = root.clone();
    let mut watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(event)
                if event.kind.is_create() || event.kind.is_modify() || event.kind.is_remove() =>
            {
                let outside_dot_folders = event.paths.iter().any(|path| {
                    let inside = path.strip_prefix(&watched_root).unwrap_or(path);
                    !inside
                        .iter()
                        .any(|part| part.to_string_lossy().starts_with('.'))
                });
                if outside_dot_folders {
                    let _ = changed.send(());
                }
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "the vault's watcher reported an error"),
        })
        .context("cannot start watching the vault")?;
    watcher
        .watch(&root, RecursiveMode::Recursive)
        .with_context(|| format!("cannot watch the vault {}", root.display()))?;
    tracing::info!(vault = %root.display(), "watching the vault for changes");
    Ok(tokio::spawn(async move {
        // Held for as long as the watch lasts.
        let _watcher = watcher;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                change = changes.recv() => if change.is_none() { return },
            }
            // Let the burst settle (up to a limit): whatever came meanwhile is the
            // same rebuild.
            let settle_until = tokio::time::Instant::now() + WATCH_SETTLE_AT_MOST;
            loop {
                let quiet = tokio::time::timeout(WATCH_DEBOUNCE, changes.recv());
                match tokio::time::timeout_at(settle_until, quiet).await {
                    Ok(Ok(Some(()))) => continue,
                    Ok(Ok(None)) => return,
                    Ok(Err(_)) | Err(_) => break,
                }
            }
            match queue_rebuild(&pool).await {
                Ok(inserted) => {
                    tracing::info!(job.id = %inserted.id, duplicate = inserted.duplicate, "a change under the vault queued a rebuild")
                }
                Err(err) => {
                    tracing::warn!(error = %format!("{err:#}"), "cannot queue the rebuild a change under the vault asked for")
                }
            }
        }
    }))
}
