//! Walking the vault: every note beneath its root, read without following a link.

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::note::{Note, parse_note};

/// The largest note read; a larger one is listed as failed.
pub const MAX_NOTE_BYTES: u64 = 1024 * 1024;

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

#[cfg(test)]
mod tests {
    use super::*;

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
