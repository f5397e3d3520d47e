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
use super::markdown::without_comments;
use super::{MAX_BODY_CHARS, MAX_TITLE_CHARS, Status, Visibility};
use crate::domain::events::{self, NewEvent};
use standmeet_jobs::{
    InsertOptions, Inserted, JobClient, JobContext, JobError, JobId, JobKind, JobState,
};

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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// Folders that could not be read: the entries of notes under them stay as they
    /// were (a folder that is not there for a moment must not remove its notes).
    pub unreadable_folders: Vec<String>,
}

impl Scan {
    /// Whether the entry of the note at `path` stays: its note was seen (read or not),
    /// or it lies under a folder that could not be read this time.
    pub fn keeps(&self, path: &str) -> bool {
        self.seen.contains(path)
            || self.unreadable_folders.iter().any(|folder| {
                folder.is_empty()
                    || path
                        .strip_prefix(folder.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            })
    }
}

/// Reads every note under `root` (blocking: run it off the async threads). Fails when
/// `root` itself cannot be read, and when it holds no note at all: an empty vault is
/// far more often a sync or a mount that is not there than an owner who deleted every
/// note, and taking it at its word would remove every entry the vault made.
pub fn scan(root: &Path) -> Result<Scan, String> {
    let found = scan_folders(root)?;
    if found.seen.is_empty() && found.unreadable_folders.is_empty() {
        return Err(format!(
            "the vault {} holds no notes (no .md file outside dot-folders); if it is a mount or a synced folder, it may not be there right now. Nothing was removed",
            root.display()
        ));
    }
    Ok(found)
}

fn scan_folders(root: &Path) -> Result<Scan, String> {
    let mut found = Scan::default();
    // Every note is opened beneath this handle of the vault's folder, so that a folder
    // swapped for a link while the scan runs leads nowhere outside.
    let vault = VaultDir::open(root)?;
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
                let folder = err.path().is_some_and(|path| {
                    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir())
                });
                found.failed.push(FailedNote {
                    path: path.clone(),
                    error: if folder {
                        format!("is a folder that cannot be read ({err}); the entries of its notes stay as they were")
                    } else {
                        format!("cannot be read: {err}")
                    },
                });
                if folder {
                    found.unreadable_folders.push(path);
                }
                continue;
            }
        };
        if entry.file_type().is_dir() {
            continue;
        }
        // A FIFO, socket or device named like a note is no note: opening a FIFO would
        // wait for a writer forever. (A symbolic link is listed below, not skipped.)
        if !entry.file_type().is_file() && !entry.path_is_symlink() {
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
            let inside = entry.path().strip_prefix(root).unwrap_or(entry.path());
            vault
                .read_capped(inside)
                .and_then(|bytes| parse_note(&path, &bytes))
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

/// The vault's folder, open: notes are opened beneath it.
struct VaultDir {
    fd: std::os::fd::OwnedFd,
    /// Open notes a folder at a time even where `openat2` works (the tests of the way
    /// without it).
    by_parts: bool,
}

/// Says once per process that `openat2` cannot be used here, and what is done instead.
fn openat2_is_missing(err: nix::errno::Errno) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        tracing::warn!(
            error = err.desc(),
            "openat2 cannot be used here (a kernel older than 5.6, or a seccomp filter): the vault's notes are opened one folder at a time, each opened without following a link, which keeps them inside the vault as openat2 did"
        );
    });
}

/// Opens `inside` (relative, without `..`) beneath `root` one part at a time, none of
/// them followed if it is a link (`O_NOFOLLOW` on each), each opened relative to the
/// folder opened before it: a folder swapped for a link at any moment leads nowhere, as
/// with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`.
fn open_by_parts(
    root: &std::os::fd::OwnedFd,
    inside: &Path,
    flags: nix::fcntl::OFlag,
) -> nix::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::OFlag;
    use std::os::fd::AsFd;
    let parts = inside
        .components()
        .map(|part| match part {
            std::path::Component::Normal(name) => Ok(name),
            // `..`, `/`: out of the vault, as openat2 says it.
            _ => Err(nix::errno::Errno::EXDEV),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let Some((note, folders)) = parts.split_last() else {
        return Err(nix::errno::Errno::ENOENT);
    };
    let mut folder: Option<std::os::fd::OwnedFd> = None;
    for name in folders {
        let at = folder.as_ref().map_or(root.as_fd(), |fd| fd.as_fd());
        // Not `O_DIRECTORY`: with it a link is `ENOTDIR`, without it `ELOOP`, which
        // says what it is. `O_NONBLOCK`: a FIFO in a folder's place does not hang.
        let next = nix::fcntl::openat(
            at,
            *name,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )?;
        folder = Some(next);
    }
    let at = folder.as_ref().map_or(root.as_fd(), |fd| fd.as_fd());
    nix::fcntl::openat(at, *note, flags, nix::sys::stat::Mode::empty())
}

impl VaultDir {
    fn open(root: &Path) -> Result<VaultDir, String> {
        use nix::fcntl::OFlag;
        let fd = nix::fcntl::open(
            root,
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|err| format!("the vault {} cannot be read: {err}", root.display()))?;
        Ok(VaultDir {
            fd,
            by_parts: false,
        })
    }

    /// The bytes of the note at `inside` (relative to the vault), at most one byte more
    /// than a note may have (a 50 MB file costs no more than that to refuse).
    ///
    /// Opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: no part of the path
    /// may be a link or lead out of the vault, whatever was swapped in since the walk
    /// saw it. Where `openat2` is missing (a kernel older than 5.6) or refused (a
    /// seccomp filter's `EPERM`), the same holds by [`open_by_parts`], said once in the
    /// log. `O_NONBLOCK`: a file swapped for a FIFO does not hang the open; what was
    /// opened is read only if it is a regular file.
    fn read_capped(&self, inside: &Path) -> Result<Vec<u8>, String> {
        use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let how = OpenHow::new()
            .flags(flags)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
        let opened = if self.by_parts {
            open_by_parts(&self.fd, inside, flags)
        } else {
            match nix::fcntl::openat2(&self.fd, inside, how) {
                Err(err @ (nix::errno::Errno::ENOSYS | nix::errno::Errno::EPERM)) => {
                    openat2_is_missing(err);
                    open_by_parts(&self.fd, inside, flags)
                }
                other => other,
            }
        };
        let file = std::fs::File::from(opened.map_err(|err| {
            match err {
                nix::errno::Errno::ELOOP | nix::errno::Errno::EXDEV => {
                    "lies behind a symbolic link or outside the vault; StandMeet follows no link"
                        .to_string()
                }
                other => format!("cannot be read: {}", other.desc()),
            }
        })?);
        let meta = file
            .metadata()
            .map_err(|err| format!("cannot be read: {err}"))?;
        if !meta.is_file() {
            return Err("is not a regular file".into());
        }
        let size = meta.len();
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
    // Obsidian's %%comments%% are the owner's private words: they leave the note here,
    // before its title, body, index or page can carry them.
    let body = without_comments(&body).into_owned();
    let text_field = |key: &str| -> Result<Option<String>, String> {
        match front.get(key) {
            None | Some(gray_matter::Pod::Null) => Ok(None),
            Some(gray_matter::Pod::String(value)) => {
                Ok(Some(without_comments(value).trim().to_string()))
            }
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
    let Some(yaml_lines) = text
        .lines()
        .skip(1)
        .position(|line| line.trim_end() == "---")
    else {
        return Err("its front matter is not closed by a line of ---".into());
    };
    let yaml = text
        .lines()
        .skip(1)
        .take(yaml_lines)
        .collect::<Vec<_>>()
        .join("\n");
    refuse_hostile_yaml(&yaml)?;
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

/// The deepest a note's front matter may nest lists and fields (Obsidian's own keys
/// nest one or two).
pub const MAX_FRONT_MATTER_DEPTH: usize = 32;

/// Reads the front matter as a stream of YAML events, before any tree is built, and
/// refuses what would make a few bytes cost the process: anchors and aliases (a YAML
/// loader copies each alias, so ten levels of them expand to billions of nodes),
/// nesting deeper than [`MAX_FRONT_MATTER_DEPTH`], and text that holds a control
/// character once its escapes are decoded (`"a\0b"` passes a check of the raw bytes).
fn refuse_hostile_yaml(yaml: &str) -> Result<(), String> {
    use yaml_rust2::parser::{Event, Parser};
    const ANCHORS: &str = "its front matter uses YAML anchors or aliases (&name, *name), which StandMeet does not read: write each value out";
    let mut parser = Parser::new_from_str(yaml);
    let mut depth = 0usize;
    loop {
        let (event, _) = parser.next_token().map_err(|err| {
            // The scanner stops deep flow nesting (`[[[[…`) on its own, before the
            // events reach the count below: the same refusal, in the same words.
            if err.info().contains("recursion limit") {
                too_deep()
            } else {
                format!("its front matter is not valid YAML: {err}")
            }
        })?;
        match event {
            Event::StreamEnd => return Ok(()),
            Event::Alias(_) => return Err(ANCHORS.into()),
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if anchor != 0 {
                    return Err(ANCHORS.into());
                }
                depth += 1;
                if depth > MAX_FRONT_MATTER_DEPTH {
                    return Err(too_deep());
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            Event::Scalar(value, _, anchor, _) => {
                if anchor != 0 {
                    return Err(ANCHORS.into());
                }
                if let Some(control) = value.chars().find(|c| is_unstorable_control(*c)) {
                    return Err(format!(
                        "its front matter holds the control character U+{:04X} in {:?}; an entry holds no control characters",
                        control as u32,
                        value.chars().take(40).collect::<String>(),
                    ));
                }
            }
            _ => {}
        }
    }
}

fn too_deep() -> String {
    format!("its front matter nests lists or fields more than {MAX_FRONT_MATTER_DEPTH} deep")
}

/// A character a note's fields may not carry once decoded: NUL and the other C0
/// controls but tab and newline (PostgreSQL cannot store NUL, and the rest are
/// invisible), and the bidirectional controls that make text read otherwise than it is
/// stored.
pub fn is_unstorable_control(c: char) -> bool {
    (c.is_ascii_control() && c != '\t' && c != '\n' && c != '\u{7f}')
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
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
    /// Entries whose note is gone but that were kept: more than half of the vault's
    /// (and more than [`REMOVALS_WITHOUT_ASKING`]) would have gone, which a rebuild
    /// does only when allowed.
    #[serde(default)]
    pub would_remove: u64,
}

/// Queues a rebuild, or finds the one waiting; records it as the newest. It removes
/// no more than half of the vault's entries (see [`RebuildArgs::allow_removals`]).
pub async fn queue_rebuild(
    pool: &PgPool,
    jobs: &JobClient,
) -> Result<Inserted, super::CorpusError> {
    queue_rebuild_with(pool, jobs, RebuildArgs::default()).await
}

/// [`queue_rebuild`] with `args`: one allowed to remove what it finds gone waits under
/// a key of its own, so that it is not taken for a waiting rebuild that is not.
pub async fn queue_rebuild_with(
    pool: &PgPool,
    jobs: &JobClient,
    args: RebuildArgs,
) -> Result<Inserted, super::CorpusError> {
    let key = if args.allow_removals {
        REBUILD_ALLOWING_REMOVALS_KEY
    } else {
        REBUILD_KEY
    };
    let mut tx = pool.begin().await?;
    let inserted = jobs
        .insert_unique_tx::<VaultRebuild>(&mut tx, &args, key, InsertOptions::default())
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

/// How a rebuild's refusal in words begins (a vault not there, or without a note): what
/// follows is for whoever asked, the MCP client too. Any other error of a rebuild is
/// ours (SQL, a path, a chain of causes): clients are told where to look, and the admin's
/// pages show it.
pub const NOT_REBUILT: &str = "The vault was not rebuilt: ";

/// The unique key of a waiting rebuild that may remove what it finds gone.
pub const REBUILD_ALLOWING_REMOVALS_KEY: &str = "corpus.vault_rebuild.allow_removals";

/// A rebuild that would remove more than this many entries (and more than half of the
/// vault's) removes none unless allowed: a note that is gone by the hundred is more
/// often a half-synced folder or a nested mount that is not there than the owner's
/// choice, and removed entries come back with new ids, breaking every link to them.
pub const REMOVALS_WITHOUT_ASKING: usize = 5;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RebuildArgs {
    /// Remove every entry whose note is gone, however many (`corpus.rebuild
    /// {allow_removals: true}`, or the confirm on the corpus page).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_removals: bool,
}

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

    async fn run(&self, job: JobContext, args: RebuildArgs) -> Result<RebuildOutput, JobError> {
        let Some(root) = self.root.clone() else {
            return Err(JobError::discard(
                "no vault is set (STANDMEET_VAULT) in the process that ran this rebuild",
            ));
        };
        // The page shows the newest rebuild, however it was queued (a schedule's too).
        // Written and committed on its own, before the rebuild's transaction: that
        // transaction lasts the whole scan, and a rebuild queued meanwhile
        // (`queue_rebuild`) locks this job's row and then this one; held here, the two
        // would wait on each other at this job's completion and PostgreSQL would end one.
        sqlx::query!(
            r#"
            INSERT INTO corpus_vault_rebuilds (only_row, last_job_id) VALUES (true, $1)
            ON CONFLICT (only_row) DO UPDATE
            SET last_job_id = greatest(corpus_vault_rebuilds.last_job_id, EXCLUDED.last_job_id)
            "#,
            job.id.0
        )
        .execute(job.pool())
        .await?;
        let mut tx = job.pool().begin().await?;
        // One rebuild at a time, across processes; the scan comes after the lock, so
        // the later rebuild reads what the earlier one did not.
        sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('corpus.vault_rebuild'))")
            .execute(&mut *tx)
            .await?;
        let found = tokio::task::spawn_blocking(move || scan(&root))
            .await
            .map_err(|err| JobError::retry(format!("the vault's scan stopped: {err}")))?
            // In words, at once: a vault that is not there or holds no note changes
            // nothing; the next change, click or night tries again.
            .map_err(|words| JobError::discard(format!("{NOT_REBUILT}{words}")))?;
        let output = apply(&mut tx, job.jobs(), found, args.allow_removals).await?;
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
            would_remove = output.would_remove,
            "the corpus was rebuilt from the vault"
        );
        if output.would_remove > 0 {
            tracing::warn!(
                would_remove = output.would_remove,
                "the rebuild kept entries whose notes are gone: more than half of the vault's would have been removed (a half-synced folder or a missing mount?); rebuild allowing removals to remove them"
            );
        }
        Ok(output)
    }
}

/// Brings the vault's entries in line with `found`, in the rebuild's transaction; what
/// is gone is removed only within [`removals_allowed`].
async fn apply(
    tx: &mut sqlx::PgConnection,
    jobs: &JobClient,
    found: Scan,
    allow_removals: bool,
) -> Result<RebuildOutput, JobError> {
    let known: HashMap<String, (i64, String)> =
        sqlx::query!("SELECT path, entry_id, content_hash FROM corpus_vault_notes")
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|row| (row.path, (row.entry_id, row.content_hash)))
            .collect();
    let keeps = |path: &str| found.keeps(path);
    let mut output = RebuildOutput {
        failed: found.failed.clone(),
        ..Default::default()
    };
    let mut to_index = Vec::new();
    for note in &found.notes {
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
    output.index_job_ids = queue_index_batches(&mut *tx, jobs, &to_index).await?;
    let gone: Vec<i64> = known
        .iter()
        .filter(|(path, _)| !keeps(path))
        .map(|(_, (entry_id, _))| *entry_id)
        .collect();
    if !allow_removals && !removals_allowed(gone.len(), known.len()) {
        output.would_remove = gone.len() as u64;
    } else if !gone.is_empty() {
        output.removed = sqlx::query!("DELETE FROM corpus_entries WHERE id = ANY($1)", &gone)
            .execute(&mut *tx)
            .await?
            .rows_affected();
    }
    Ok(output)
}

/// Whether a rebuild may remove `gone` of the vault's `known` entries without being
/// allowed to: up to [`REMOVALS_WITHOUT_ASKING`], or up to half of them.
pub fn removals_allowed(gone: usize, known: usize) -> bool {
    gone <= REMOVALS_WITHOUT_ASKING || gone * 2 <= known
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebuild_removes_up_to_five_entries_or_up_to_half_without_asking() {
        assert!(removals_allowed(0, 0));
        assert!(removals_allowed(5, 5), "five, all of them");
        assert!(
            !removals_allowed(6, 10),
            "more than five and more than half"
        );
        assert!(removals_allowed(6, 12), "half");
        assert!(!removals_allowed(7, 12));
        assert!(removals_allowed(400, 10_000));
    }

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

    /// A note whose front matter nests YAML aliases `levels` deep, each level a list of
    /// ten of the one before: a loader that copied every alias would build 10^levels
    /// nodes from about 60 bytes a level.
    fn alias_bomb(levels: usize) -> String {
        let mut yaml = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..levels {
            let before = format!("*a{}", level - 1);
            let items = [before.as_str(); 10].join(", ");
            yaml.push_str(&format!("a{level}: &a{level} [{items}]\n"));
        }
        format!("---\ntitle: Bomb\n{yaml}---\nText.")
    }

    #[test]
    fn front_matter_with_anchors_aliases_or_deep_nesting_is_refused_before_a_tree_is_built() {
        // Nine levels would be 10^9 nodes: refused in microseconds, with no memory to
        // speak of (a loader that expanded it would take tens of gigabytes).
        let started = std::time::Instant::now();
        let err = note("Bomb.md", &alias_bomb(9)).unwrap_err();
        assert!(err.contains("anchors or aliases"), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        for text in [
            "---\nbase: &base {a: 1}\ntitle: x\n---\nText",
            "---\ntitle: &t Anchored\n---\nText",
            "---\nmerged:\n  <<: *missing\n---\nText",
        ] {
            let err = note("anchored.md", text).unwrap_err();
            assert!(
                err.contains("anchors or aliases") || err.contains("not valid YAML"),
                "{text:?}: {err}"
            );
        }
        let deep = format!(
            "---\ntitle: Deep\nx: {}{}\n---\nText",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        let err = note("Deep.md", &deep).unwrap_err();
        assert!(err.contains("more than 32 deep"), "{err}");
        let mut block = String::from("---\ntitle: Deep\n");
        for depth in 0..40 {
            block.push_str(&format!("{}k{depth}:\n", "  ".repeat(depth)));
        }
        block.push_str("---\nText");
        let err = note("Block.md", &block).unwrap_err();
        assert!(err.contains("more than 32 deep"), "{err}");
        // 32 levels are still a note.
        let fine = format!(
            "---\ntitle: Fine\nx: {}1{}\n---\nText",
            "[".repeat(31),
            "]".repeat(31)
        );
        assert_eq!(note("Fine.md", &fine).unwrap().title, "Fine");
    }

    #[test]
    fn a_control_character_written_as_a_yaml_escape_fails_the_note_with_words() {
        for text in [
            "---\ntitle: \"a\\0b\"\n---\nText",
            "---\ntitle: \"\\u0000\"\n---\nText",
            "---\ntags: [ok, \"b\\x00d\"]\n---\nText",
            "---\naliases:\n  - \"bell\\a\"\n---\nText",
            "---\ntitle: \"right-to-left \\u202E override\"\n---\nText",
            "---\nunused: \"\\x1b[31m\"\n---\nText",
        ] {
            let err = note("control.md", text).unwrap_err();
            assert!(err.contains("control character U+"), "{text:?}: {err}");
        }
        // Tabs and newlines are text.
        let fine = note(
            "fine.md",
            "---\ntitle: \"a\\tb\"\ntags: \"x\\ny\"\n---\nText",
        )
        .unwrap();
        assert_eq!(fine.title, "a\tb");
    }

    #[test]
    fn comments_leave_the_body_the_front_matter_title_and_the_first_heading() {
        let headed = note(
            "Launch.md",
            "# Launch %%codename heron%%\n\nRun `printf(\"%d%%\")` now. %%secret%% Done.",
        )
        .unwrap();
        assert_eq!(headed.title, "Launch");
        assert!(
            !headed.body.contains("heron") && !headed.body.contains("secret"),
            "{}",
            headed.body
        );
        assert!(headed.body.contains("%d%%"), "{}", headed.body);
        let titled = note("T.md", "---\ntitle: Plan %%private%% B\n---\nText").unwrap();
        assert_eq!(titled.title, "Plan  B");
        let unclosed = note("U.md", "Shown. %%hidden to the end\n\nStill hidden.").unwrap();
        assert_eq!(unclosed.body.trim(), "Shown.");
    }

    fn write_note(root: &Path, path: &str, text: &[u8]) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_fifo_socket_or_device_named_like_a_note_is_skipped_not_opened() {
        let vault = tempfile::tempdir().unwrap();
        let root = vault.path();
        write_note(root, "A.md", b"# A");
        nix::unistd::mkfifo(&root.join("pipe.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(root.join("socket.md")).unwrap();
        // The scan would wait forever on the FIFO: it runs on a thread of its own and
        // must be done within seconds.
        let (done, finished) = std::sync::mpsc::channel();
        let root_path = root.to_path_buf();
        std::thread::spawn(move || done.send(scan(&root_path)).unwrap());
        let found = finished
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the scan did not hang on the FIFO")
            .unwrap();
        let paths: Vec<&str> = found.notes.iter().map(|n| n.path.as_str()).collect();
        assert_eq!(paths, ["A.md"]);
        assert!(found.failed.is_empty(), "{:?}", found.failed);
        // Opened directly (a note swapped for a FIFO after the walk), it is refused.
        let err = VaultDir::open(root)
            .unwrap()
            .read_capped(Path::new("pipe.md"))
            .unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn a_note_is_opened_beneath_the_vault_even_when_a_folder_became_a_link() {
        let vault = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        write_note(outside.path(), "secret.md", b"# Outside the vault");
        write_note(vault.path(), "folder/inside.md", b"# Inside");
        let dir = VaultDir::open(vault.path()).unwrap();
        assert_eq!(
            dir.read_capped(Path::new("folder/inside.md")).unwrap(),
            b"# Inside"
        );
        // The folder the walk saw is swapped for a link to a folder outside.
        std::fs::remove_dir_all(vault.path().join("folder")).unwrap();
        std::os::unix::fs::symlink(outside.path(), vault.path().join("folder")).unwrap();
        let err = dir.read_capped(Path::new("folder/secret.md")).unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");
        let err = dir.read_capped(Path::new("../outside.md")).unwrap_err();
        assert!(err.contains("outside the vault"), "{err}");
    }

    /// Where `openat2` is missing or refused, notes are opened a folder at a time, and
    /// the same swaps lead nowhere.
    #[test]
    fn without_openat2_a_note_is_still_opened_beneath_the_vault_and_no_link_followed() {
        let vault = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        write_note(outside.path(), "secret.md", b"# Outside the vault");
        write_note(vault.path(), "folder/deeper/inside.md", b"# Inside");
        let dir = VaultDir {
            by_parts: true,
            ..VaultDir::open(vault.path()).unwrap()
        };
        assert_eq!(
            dir.read_capped(Path::new("folder/deeper/inside.md"))
                .unwrap(),
            b"# Inside"
        );
        std::os::unix::fs::symlink(
            outside.path().join("secret.md"),
            vault.path().join("link.md"),
        )
        .unwrap();
        let err = dir.read_capped(Path::new("link.md")).unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");
        std::fs::remove_dir_all(vault.path().join("folder/deeper")).unwrap();
        std::os::unix::fs::symlink(outside.path(), vault.path().join("folder/deeper")).unwrap();
        let err = dir
            .read_capped(Path::new("folder/deeper/secret.md"))
            .unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");
        let err = dir.read_capped(Path::new("../outside.md")).unwrap_err();
        assert!(err.contains("outside the vault"), "{err}");
    }

    #[test]
    fn a_vault_with_no_note_fails_the_scan_with_words() {
        let vault = tempfile::tempdir().unwrap();
        write_note(vault.path(), ".obsidian/app.md", b"not a note");
        write_note(vault.path(), "image.png", b"\x89PNG");
        let err = scan(vault.path()).unwrap_err();
        assert!(
            err.contains("holds no notes") && err.contains("Nothing was removed"),
            "{err}"
        );
    }

    #[test]
    fn a_folder_that_cannot_be_read_is_listed_and_keeps_its_notes() {
        let vault = tempfile::tempdir().unwrap();
        let root = vault.path().to_path_buf();
        write_note(&root, "A.md", b"# A");
        write_note(&root, "Locked/B.md", b"# B");
        use std::os::unix::fs::PermissionsExt;
        // The vault readable by anybody, but for its one locked folder.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(root.join("Locked"), std::fs::Permissions::from_mode(0o000))
            .unwrap();
        // As root every folder can be read: the scan runs on a thread that is somebody
        // else (setresuid on this thread alone; the raw call, as glibc's would change
        // every thread of the test process).
        let found = std::thread::spawn(move || {
            if nix::unistd::geteuid().is_root() {
                // SAFETY: a plain system call on this thread, with no memory passed.
                let changed =
                    unsafe { nix::libc::syscall(nix::libc::SYS_setresuid, 65534, 65534, 65534) };
                assert_eq!(changed, 0, "could not become nobody on this thread");
            }
            scan(&root)
        })
        .join()
        .unwrap()
        .unwrap();
        std::fs::set_permissions(
            vault.path().join("Locked"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let paths: Vec<&str> = found.notes.iter().map(|n| n.path.as_str()).collect();
        assert_eq!(paths, ["A.md"]);
        assert_eq!(found.unreadable_folders, ["Locked"]);
        assert!(
            found
                .failed
                .iter()
                .any(|f| f.path == "Locked" && f.error.contains("cannot be read")),
            "{:?}",
            found.failed
        );
        assert!(found.keeps("Locked/B.md") && found.keeps("Locked/deeper/C.md"));
        assert!(!found.keeps("LockedOut.md") && !found.keeps("Gone.md"));
    }
}

/// `corpus.rebuild`'s and `corpus.rebuild_result`'s answer: the counts once the rebuild
/// finished, else only its job and `pending`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RebuildAnswer {
    pub job_id: JobId,
    pub pending: bool,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub counts: Option<RebuildCounts>,
}

/// A finished rebuild's counts, as the tools answer them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RebuildCounts {
    pub added: u64,
    pub updated: u64,
    pub removed: u64,
    pub unchanged: u64,
    pub failed: Vec<FailedNote>,
    /// Entries whose note is gone, kept because removing them all would take more than
    /// half of the vault's (and more than five): `corpus.rebuild {allow_removals:
    /// true}` removes them. Answered only when there are any, so that the answer of an
    /// ordinary rebuild keeps its shape.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub would_remove: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// What rebuild `job_id` did, or that it is still pending.
pub async fn rebuild_result(
    jobs: &JobClient,
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
        Some(output) if row.state == JobState::Completed => Ok(RebuildAnswer {
            job_id,
            pending: false,
            counts: Some(RebuildCounts {
                added: output.added,
                updated: output.updated,
                removed: output.removed,
                unchanged: output.unchanged,
                failed: output.failed,
                would_remove: output.would_remove,
            }),
        }),
        _ => {
            let last_error = row
                .errors
                .as_array()
                .and_then(|errors| errors.last())
                .and_then(|last| last["error"].as_str())
                .unwrap_or_default()
                .to_string();
            let reason = match last_error.strip_prefix(NOT_REBUILT) {
                Some(words) => format!("{NOT_REBUILT}{words}"),
                None => format!(
                    "Its errors are on its page in the console (/admin/tasks/{}).",
                    job_id.0
                ),
            };
            Err(super::CorpusError::RebuildFailed {
                job_id: job_id.0,
                state: row.state.as_str(),
                reason,
                last_error,
            })
        }
    }
}
