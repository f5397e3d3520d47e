//! The vault's watcher (`STANDMEET_VAULT_WATCH`): a change under the vault queues a
//! rebuild within 2 s.
//!
//! Nothing the vault's folder does can stop or restart StandMeet. The watcher is a task
//! that retries: a folder that is not there yet (a mount that comes up after the
//! server), that cannot be read, or that cannot be watched (the kernel's limit of
//! inotify watches reached) leaves it `waiting`, and it tries again with a growing
//! pause (1 s, doubling, at most a minute). A folder that goes away while watched (an
//! unmount) puts it back to `waiting`; when the folder comes back, a rebuild is queued,
//! since anything may have changed meanwhile. `/readyz` says which
//! (`"vault": "off" | "watching" | "waiting"`); the server stays ready in every case.
//!
//! No link is followed: the walk that finds the folders to watch does not descend into
//! links (a link to `/` is a link, not a folder), and dot-folders (`.obsidian/`,
//! `.git/`) are not watched at all. Each folder has a watch of its own, so a folder
//! that cannot be watched (it cannot be read) is left out with a warning while the
//! rest is watched; folders created or moved in later are watched once they appear.
//!
//! The watcher's own thread (notify's) only sets flags and wakes the task through a
//! [`Notify`]: however many events come, what is queued between them is a few bits.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use sqlx::PgPool;
use standmeet_jobs::JobClient;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long the watcher waits for changes to settle before it queues a rebuild: a
/// burst of saves (or 10,000 files copied in) is one rebuild.
pub const WATCH_DEBOUNCE: Duration = Duration::from_millis(500);

/// The longest a rebuild waits for changes to settle: one comes within 2 s of a change
/// even while the vault never stops changing.
const WATCH_SETTLE_AT_MOST: Duration = Duration::from_millis(1500);

/// The first pause before watching is tried again, doubled after each failure.
const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest pause between tries.
const RETRY_AT_MOST: Duration = Duration::from_secs(60);
/// How often a watched vault's folder is checked to still be the one watched: an
/// unmount, or a mount over it, sends no event to the watches of the folder below.
const IDENTITY_CHECK_EVERY: Duration = Duration::from_secs(10);

/// What the watcher does now, as `/readyz` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchState {
    /// No vault, or `STANDMEET_VAULT_WATCH` is off.
    Off,
    /// Every folder it could watch is watched.
    Watching,
    /// The folder cannot be watched yet (not there, not readable, the kernel's limit
    /// reached); it tries again.
    Waiting,
}

impl WatchState {
    pub fn as_str(self) -> &'static str {
        match self {
            WatchState::Off => "off",
            WatchState::Watching => "watching",
            WatchState::Waiting => "waiting",
        }
    }
}

/// The watcher's state, readable anywhere (the health probes) and awaitable (tests and
/// the lab wait for `watching` before they write a note).
#[derive(Clone, Debug)]
pub struct WatchStatus {
    state: tokio::sync::watch::Receiver<WatchState>,
}

impl Default for WatchStatus {
    /// `off`, for good.
    fn default() -> Self {
        let (_, state) = tokio::sync::watch::channel(WatchState::Off);
        WatchStatus { state }
    }
}

impl WatchStatus {
    pub fn get(&self) -> WatchState {
        *self.state.borrow()
    }

    /// Resolves once the state is `wanted` (at once if it is); `false` if the watcher
    /// ended first.
    pub async fn until(&self, wanted: WatchState) -> bool {
        let mut state = self.state.clone();
        state.wait_for(|now| *now == wanted).await.is_ok()
    }
}

/// Starts watching the vault at `root` until `stop`: a task that never fails (see the
/// module documentation). Answers its state and the task.
pub fn watch(
    pool: PgPool,
    jobs: JobClient,
    root: PathBuf,
    stop: CancellationToken,
) -> (WatchStatus, tokio::task::JoinHandle<()>) {
    let (state, receiver) = tokio::sync::watch::channel(WatchState::Waiting);
    let task = tokio::spawn(async move {
        watch_until_stopped(&pool, &jobs, &root, &state, &stop).await;
        let _ = state.send(WatchState::Off);
    });
    (WatchStatus { state: receiver }, task)
}

async fn watch_until_stopped(
    pool: &PgPool,
    jobs: &JobClient,
    root: &Path,
    state: &tokio::sync::watch::Sender<WatchState>,
    stop: &CancellationToken,
) {
    let mut pause = RETRY_FIRST;
    // Whether the vault was ever not watched since the start: when watching begins
    // after that, what changed meanwhile was seen by nobody, so a rebuild is queued.
    let mut missed_changes = false;
    let mut last_reason = String::new();
    loop {
        let started = {
            let root = root.to_path_buf();
            tokio::task::spawn_blocking(move || FolderWatch::start(&root))
                .await
                .unwrap_or_else(|err| Err(format!("the watcher's set-up stopped: {err}")))
        };
        match started {
            Ok(watch) => {
                state.send_replace(WatchState::Watching);
                tracing::info!(vault = %root.display(), folders = watch.folders.len(), "watching the vault for changes");
                last_reason.clear();
                pause = RETRY_FIRST;
                if std::mem::take(&mut missed_changes) {
                    queue_rebuild(pool, jobs, "the vault can be watched again").await;
                }
                match watch.follow(pool, jobs, root, stop).await {
                    Ended::Stopped => return,
                    Ended::Lost(reason) => {
                        tracing::warn!(vault = %root.display(), reason, "the vault's watch is lost; watching again when the folder is back");
                    }
                }
                // The folder went away: its notes may come back changed.
                missed_changes = true;
            }
            Err(reason) => {
                // Said once per reason, not at every try.
                if reason != last_reason {
                    tracing::warn!(
                        vault = %root.display(),
                        reason,
                        "the vault cannot be watched yet; StandMeet serves on and tries again"
                    );
                    last_reason = reason;
                }
                missed_changes = true;
            }
        }
        state.send_replace(WatchState::Waiting);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(RETRY_AT_MOST);
    }
}

/// Why a watch ended.
enum Ended {
    Stopped,
    Lost(String),
}

/// What notify's thread tells the task: flags, and one wake-up however many came.
#[derive(Default)]
struct Signals {
    wake: Notify,
    /// A note or folder changed outside dot-folders, or events were lost.
    changed: AtomicBool,
    /// A folder was created or moved in: it needs a watch of its own.
    new_folders: AtomicBool,
    /// The vault's folder itself went away or was moved, or the watch broke.
    lost: AtomicBool,
    /// The kernel's limit of watches was reached while notify watched a new folder.
    limit_reached: AtomicBool,
}

/// The watches on every folder of the vault (dot-folders and links left out).
struct FolderWatch {
    watcher: notify::RecommendedWatcher,
    signals: Arc<Signals>,
    /// The folders watched, by path, with the identity (device, inode) they had: a
    /// folder removed and made again at the same path is watched again.
    folders: HashMap<PathBuf, (u64, u64)>,
    /// The vault's folder's own identity when the watch began.
    root_identity: (u64, u64),
}

/// A folder's device and inode (following a link only where `root` itself is one, as
/// the setting names it).
fn identity(path: &Path) -> std::io::Result<(u64, u64)> {
    std::fs::metadata(path).map(|meta| (meta.dev(), meta.ino()))
}

/// A notify error in words, naming the kernel's limit where that is what it is.
fn watch_error_words(err: &notify::Error) -> String {
    match &err.kind {
        notify::ErrorKind::MaxFilesWatch => "the kernel's limit of inotify watches is reached (sysctl fs.inotify.max_user_watches)".to_string(),
        notify::ErrorKind::Io(io) if io.raw_os_error() == Some(nix::libc::EMFILE) => {
            "the kernel's limit of inotify instances is reached (sysctl fs.inotify.max_user_instances)".to_string()
        }
        _ => err.to_string(),
    }
}

impl FolderWatch {
    /// Watches every folder under `root` (blocking: run it off the async threads).
    /// Fails, in words, when `root` is not a folder that can be watched or when the
    /// kernel's limit is reached; a folder under it that cannot be watched is left out.
    fn start(root: &Path) -> Result<FolderWatch, String> {
        let root_identity = match std::fs::metadata(root) {
            Ok(meta) if meta.is_dir() => (meta.dev(), meta.ino()),
            Ok(_) => return Err("it is not a folder".into()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err("no folder is there (yet)".into());
            }
            Err(err) => return Err(format!("it cannot be read: {err}")),
        };
        let signals = Arc::new(Signals::default());
        let handler = {
            let signals = signals.clone();
            let root = root.to_path_buf();
            move |event: notify::Result<notify::Event>| on_event(&signals, &root, event)
        };
        let watcher = notify::RecommendedWatcher::new(
            handler,
            notify::Config::default().with_follow_symlinks(false),
        )
        .map_err(|err| watch_error_words(&err))?;
        let mut watch = FolderWatch {
            watcher,
            signals,
            folders: HashMap::new(),
            root_identity,
        };
        watch.watch_new_folders(root)?;
        Ok(watch)
    }

    /// Adds a watch for each folder under `root` not watched yet. Fails when the root
    /// cannot be watched or the kernel's limit is reached.
    fn watch_new_folders(&mut self, root: &Path) -> Result<(), String> {
        let mut left_out = Vec::new();
        let walk = walkdir::WalkDir::new(root)
            .follow_links(false)
            .into_iter()
            .filter_entry(|entry| {
                entry.depth() == 0 || !entry.file_name().to_string_lossy().starts_with('.')
            });
        for item in walk {
            // A folder whose listing cannot be read is watched (below, as its parent's
            // entry) if it can be; what is under it is not reached.
            let Ok(entry) = item else { continue };
            if entry.depth() > 0 && !entry.file_type().is_dir() {
                continue;
            }
            let path = entry.path().to_path_buf();
            let Ok(id) = identity(&path) else { continue };
            if self.folders.get(&path) == Some(&id) {
                continue;
            }
            match self.watcher.watch(&path, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    self.folders.insert(path, id);
                }
                Err(err) if matches!(err.kind, notify::ErrorKind::MaxFilesWatch) => {
                    return Err(watch_error_words(&err));
                }
                Err(err) if entry.depth() == 0 => return Err(watch_error_words(&err)),
                Err(err) => left_out.push(format!(
                    "{} ({})",
                    path.strip_prefix(root).unwrap_or(&path).display(),
                    watch_error_words(&err)
                )),
            }
        }
        if !left_out.is_empty() {
            tracing::warn!(
                folders = %left_out.join(", "),
                "folders of the vault that cannot be watched: a change there waits for the next rebuild"
            );
        }
        Ok(())
    }

    /// Queues a rebuild for each settled burst of changes, until `stop` or until the
    /// watch is lost.
    async fn follow(
        mut self,
        pool: &PgPool,
        jobs: &JobClient,
        root: &Path,
        stop: &CancellationToken,
    ) -> Ended {
        let mut check = tokio::time::interval(IDENTITY_CHECK_EVERY);
        check.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return Ended::Stopped,
                _ = self.signals.wake.notified() => {}
                _ = check.tick() => {
                    match identity(root) {
                        Ok(now) if now == self.root_identity => continue,
                        Ok(_) => return Ended::Lost("another folder is at the vault's path now (a mount over it, or it was made again)".into()),
                        Err(err) => return Ended::Lost(format!("the vault's folder is gone: {err}")),
                    }
                }
            }
            // A new folder is watched at once, so that little written into it goes
            // unseen (what does is read by the rebuild queued below, after the watch).
            self = match self.watch_new_folders_if_asked(root).await {
                Ok(watch) => watch,
                Err(ended) => return ended,
            };
            // Let the burst settle (up to a limit): whatever came meanwhile is the
            // same rebuild.
            let settle_until = tokio::time::Instant::now() + WATCH_SETTLE_AT_MOST;
            while tokio::time::timeout_at(
                settle_until,
                tokio::time::timeout(WATCH_DEBOUNCE, self.signals.wake.notified()),
            )
            .await
            .is_ok_and(|quiet| quiet.is_ok())
            {}
            if self.signals.lost.swap(false, Ordering::Relaxed) {
                return Ended::Lost("the vault's folder was removed or moved".into());
            }
            if self.signals.limit_reached.swap(false, Ordering::Relaxed) {
                return Ended::Lost(
                    "a new folder could not be watched: the kernel's limit of inotify watches is reached (sysctl fs.inotify.max_user_watches)".into(),
                );
            }
            self = match self.watch_new_folders_if_asked(root).await {
                Ok(watch) => watch,
                Err(ended) => return ended,
            };
            if self.signals.changed.swap(false, Ordering::Relaxed) {
                queue_rebuild(pool, jobs, "a change under the vault").await;
            }
        }
    }
}

impl FolderWatch {
    /// Walks for new folders to watch when an event asked for it (off the async
    /// threads).
    async fn watch_new_folders_if_asked(mut self, root: &Path) -> Result<FolderWatch, Ended> {
        if !self.signals.new_folders.swap(false, Ordering::Relaxed) {
            return Ok(self);
        }
        let root = root.to_path_buf();
        let walked = tokio::task::spawn_blocking(move || {
            let added = self.watch_new_folders(&root);
            (self, added)
        })
        .await;
        match walked {
            Ok((watch, Ok(()))) => Ok(watch),
            Ok((_, Err(reason))) => Err(Ended::Lost(reason)),
            Err(err) => Err(Ended::Lost(format!("the watcher's walk stopped: {err}"))),
        }
    }
}

/// Runs on notify's thread for each event: sets the flags and wakes the task.
fn on_event(signals: &Signals, root: &Path, event: notify::Result<notify::Event>) {
    match event {
        Ok(event) => {
            let flags = what_it_asks(&event, root);
            if flags.is_empty() {
                return;
            }
            if flags.changed {
                signals.changed.store(true, Ordering::Relaxed);
            }
            if flags.new_folder {
                signals.new_folders.store(true, Ordering::Relaxed);
            }
            if flags.lost {
                signals.lost.store(true, Ordering::Relaxed);
            }
        }
        Err(err) if matches!(err.kind, notify::ErrorKind::MaxFilesWatch) => {
            signals.limit_reached.store(true, Ordering::Relaxed);
        }
        Err(err) => {
            tracing::warn!(error = %err, "the vault's watcher reported an error; rebuilding to be sure");
            signals.changed.store(true, Ordering::Relaxed);
        }
    }
    signals.wake.notify_one();
}

/// What one event asks of the task.
#[derive(Debug, Default, PartialEq, Eq)]
struct Asks {
    /// A rebuild: a note or folder created, changed or removed outside dot-folders, or
    /// events lost (the kernel's queue overflowed, so anything may have changed).
    changed: bool,
    /// A walk for folders to watch: one was created or moved in.
    new_folder: bool,
    /// Watching again: the vault's folder itself was removed or moved.
    lost: bool,
}

impl Asks {
    fn is_empty(&self) -> bool {
        *self == Asks::default()
    }
}

fn what_it_asks(event: &notify::Event, root: &Path) -> Asks {
    if event.need_rescan() {
        tracing::info!("the vault's watcher lost events (its queue overflowed): rebuilding");
        // Folders made meanwhile were not seen either.
        return Asks {
            changed: true,
            new_folder: true,
            lost: false,
        };
    }
    let outside_dot_folders = |path: &PathBuf| {
        let inside = path.strip_prefix(root).unwrap_or(path);
        !inside
            .iter()
            .any(|part| part.to_string_lossy().starts_with('.'))
    };
    let changed = (event.kind.is_create() || event.kind.is_modify() || event.kind.is_remove())
        && event.paths.iter().any(outside_dot_folders);
    let moved_in = matches!(
        event.kind,
        EventKind::Modify(notify::event::ModifyKind::Name(
            notify::event::RenameMode::To | notify::event::RenameMode::Both
        ))
    );
    let new_folder = changed
        && (matches!(
            event.kind,
            EventKind::Create(notify::event::CreateKind::Folder)
        ) || (moved_in
            && event
                .paths
                .iter()
                .any(|path| std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir()))));
    let lost = (event.kind.is_remove()
        || matches!(
            event.kind,
            EventKind::Modify(notify::event::ModifyKind::Name(
                notify::event::RenameMode::From
            ))
        ))
        && event.paths.iter().any(|path| path == root);
    Asks {
        changed,
        new_folder,
        lost,
    }
}

/// Queues a rebuild for the watcher, in a trace of its own (nobody clicked, a file
/// changed).
async fn queue_rebuild(pool: &PgPool, jobs: &JobClient, why: &'static str) {
    let span = crate::trace_span!(parent: None, "vault.watch", otel.name = "vault change");
    let queued = tracing::Instrument::instrument(super::queue_rebuild(pool, jobs), span);
    match queued.await {
        Ok(inserted) => {
            tracing::info!(job.id = %inserted.id, duplicate = inserted.duplicate, why, "the vault's watcher queued a rebuild")
        }
        Err(err) => {
            tracing::warn!(
                error = crate::causes::error_chain(&err),
                why,
                "cannot queue the rebuild the vault's watcher asked for"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, CreateKind, EventKind, Flag, ModifyKind, RemoveKind};

    fn event(kind: EventKind, root: &Path, path: &str) -> notify::Event {
        notify::Event::new(kind).add_path(if path.is_empty() {
            root.to_path_buf()
        } else {
            root.join(path)
        })
    }

    #[test]
    fn changes_outside_dot_folders_and_lost_events_ask_for_a_rebuild() {
        let root = Path::new("/vault");
        let asks = |kind, path| what_it_asks(&event(kind, root, path), root);
        assert!(asks(EventKind::Create(CreateKind::File), "A.md").changed);
        assert!(asks(EventKind::Create(CreateKind::File), ".obsidian/w.json").is_empty());
        assert!(asks(EventKind::Access(AccessKind::Any), "A.md").is_empty());
        let overflow = notify::Event::new(EventKind::Other).set_flag(Flag::Rescan);
        let asked = what_it_asks(&overflow, root);
        assert!(asked.changed && asked.new_folder, "{asked:?}");
    }

    #[test]
    fn a_new_folder_is_walked_and_the_vault_itself_removed_is_a_lost_watch() {
        let root = Path::new("/vault");
        let asks = |kind, path| what_it_asks(&event(kind, root, path), root);
        let created = asks(EventKind::Create(CreateKind::Folder), "Projects");
        assert!(created.changed && created.new_folder && !created.lost);
        assert!(!asks(EventKind::Create(CreateKind::Folder), ".git/objects").new_folder);
        let removed = asks(EventKind::Remove(RemoveKind::Folder), "");
        assert!(removed.lost, "{removed:?}");
        let moved = asks(
            EventKind::Modify(ModifyKind::Name(notify::event::RenameMode::From)),
            "",
        );
        assert!(moved.lost, "{moved:?}");
        assert!(!asks(EventKind::Remove(RemoveKind::File), "A.md").lost);
    }

    /// Polls `status` until it is `wanted`, up to 10 s.
    async fn until(status: &WatchStatus, wanted: WatchState) {
        tokio::time::timeout(Duration::from_secs(10), status.until(wanted))
            .await
            .unwrap_or_else(|_| panic!("not {wanted:?} within 10 s: {:?}", status.get()));
    }

    #[test]
    fn folders_under_the_vault_are_watched_but_not_links_or_dot_folders() {
        let vault = tempfile::tempdir().unwrap();
        let root = vault.path();
        std::fs::create_dir_all(root.join("Projects/Deep")).unwrap();
        std::fs::create_dir_all(root.join(".obsidian/plugins")).unwrap();
        std::os::unix::fs::symlink("/", root.join("everything")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("Projects/etc")).unwrap();
        let watch = FolderWatch::start(root).unwrap();
        let mut watched: Vec<String> = watch
            .folders
            .keys()
            .map(|path| {
                path.strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        watched.sort();
        assert_eq!(watched, ["", "Projects", "Projects/Deep"]);
    }

    #[test]
    fn a_vault_that_is_not_there_or_a_file_cannot_be_watched_yet_in_words() {
        let vault = tempfile::tempdir().unwrap();
        let missing = FolderWatch::start(&vault.path().join("later"))
            .err()
            .unwrap();
        assert!(missing.contains("no folder is there"), "{missing}");
        std::fs::write(vault.path().join("note.md"), "x").unwrap();
        let file = FolderWatch::start(&vault.path().join("note.md"))
            .err()
            .unwrap();
        assert!(file.contains("not a folder"), "{file}");
    }

    #[tokio::test]
    async fn the_watcher_waits_for_a_missing_vault_and_waits_again_when_it_goes() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join("vault");
        // No database is reached here: the rebuilds it would queue fail and are
        // logged; the states are what is looked at.
        let pool = sqlx::postgres::PgPoolOptions::new()
            .acquire_timeout(Duration::from_millis(50))
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .unwrap();
        let jobs = JobClient::new(pool.clone(), 4);
        let stop = CancellationToken::new();
        let (status, task) = watch(pool, jobs, root.clone(), stop.clone());
        until(&status, WatchState::Waiting).await;
        std::fs::create_dir(&root).unwrap();
        until(&status, WatchState::Watching).await;
        std::fs::remove_dir(&root).unwrap();
        until(&status, WatchState::Waiting).await;
        stop.cancel();
        task.await.unwrap();
        assert_eq!(status.get(), WatchState::Off);
    }
}
