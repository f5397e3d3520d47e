//! The browser's files under `/pkg/` (the wasm, its JS and the CSS), served under names
//! that change with their contents, so that browsers may keep them for a year.
//!
//! `scripts/build` (like `cargo leptos build` with `hash-files` in `Cargo.toml`)
//! renames them to `standmeet.<hash>.js` and so on and writes the hashes to `hash.txt`
//! beside the server binary, where Leptos looks for them when it writes the page's
//! `<script>` and `<link>`. A page only ever names the files of its own release, so a
//! file with a hash in its name never changes: it is answered with
//! `Cache-Control: public, max-age=31536000, immutable`, and a browser does not ask
//! again until a release brings new names.
//!
//! The plain names (`/pkg/standmeet.css`) keep working for whoever wrote them down:
//! they answer the current file, checked again before each use (`no-cache`).
//!
//! Each file goes compressed to a browser that takes it: `scripts/build` writes a
//! brotli (`.br`) and a gzip (`.gz`) copy beside it, and the one the request's
//! `Accept-Encoding` takes is sent as it is (brotli first), with
//! `Vary: Accept-Encoding` so that a cache in between keeps them apart. The wasm is
//! megabytes: compressed per request it would cost a core on every first visit, and
//! brotli at its best level (a quarter of the size) is far too slow for that.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{CACHE_CONTROL, VARY};
use axum::http::{HeaderValue, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use leptos::config::LeptosOptions;
use tower::ServiceExt;
use tower_http::services::ServeDir;

/// What a file with its hash in its name may be kept for.
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// What a file asked for by its plain name may be kept for: asked again before each use.
const NO_CACHE: &str = "no-cache";

/// The files of this release by their plain names and by their hashed ones.
#[derive(Clone, Debug, Default)]
pub struct SiteFiles {
    /// Where the files are served from, such as `/pkg`.
    pkg_path: String,
    /// `standmeet.css` → `standmeet.<hash>.css`, and so on for the JS and the wasm.
    hashed_names: HashMap<String, String>,
    /// Where they are on disk (`LEPTOS_SITE_ROOT` and the package directory), and the
    /// names every page asks for (`standmeet.css`, `.js`, `.wasm`, hashed or not).
    site_root: PathBuf,
    pkg_dir: PathBuf,
    page_files: Vec<String>,
    /// Where the hash file was looked for (beside the binary).
    hash_file: PathBuf,
}

impl SiteFiles {
    /// Finds the hash file that `scripts/build` wrote beside this binary and turns
    /// Leptos' `hash_files` on when it is there (unless `LEPTOS_HASH_FILES` says
    /// otherwise). Without one, the plain names are used, as before.
    pub fn configure(options: &mut LeptosOptions) -> SiteFiles {
        let hash_file = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf))
            .unwrap_or_default()
            .join(options.hash_file.as_ref());
        SiteFiles::configure_with(options, hash_file)
    }

    /// [`SiteFiles::configure`] with the hash file at `hash_file` (a test binary is not
    /// where the build put the server's).
    pub fn configure_with(options: &mut LeptosOptions, hash_file: PathBuf) -> SiteFiles {
        let explicit = std::env::var("LEPTOS_HASH_FILES").ok();
        let hashes = std::fs::read_to_string(&hash_file).ok();
        options.hash_files = match explicit.as_deref() {
            Some(value) => value.trim() == "true",
            None => hashes.is_some(),
        };
        let mut files = match (&hashes, options.hash_files) {
            (Some(text), true) => SiteFiles::from_hash_file(
                text,
                &options.output_name,
                &format!("/{}", options.site_pkg_dir.trim_matches('/')),
            ),
            _ => SiteFiles::default(),
        };
        files.pkg_path = format!("/{}", options.site_pkg_dir.trim_matches('/'));
        files.site_root = PathBuf::from(options.site_root.as_ref());
        files.pkg_dir = files.site_root.join(options.site_pkg_dir.as_ref());
        files.page_files = ["css", "js", "wasm"]
            .iter()
            .map(|kind| {
                let plain = format!("{}.{kind}", options.output_name);
                files.hashed_names.get(&plain).cloned().unwrap_or(plain)
            })
            .collect();
        files.hash_file = hash_file;
        files
    }

    /// The files every page names that are not on disk: none when the site is where
    /// `LEPTOS_SITE_ROOT` says, with the hash file of the same build beside the binary.
    /// A few `stat`s: cheap enough for every health probe.
    ///
    /// A site whose files have hashed names, served by a binary without the hash file,
    /// is missing too: its pages would name the plain files, which are not there.
    pub fn missing(&self) -> Vec<PathBuf> {
        self.page_files
            .iter()
            .map(|name| self.pkg_dir.join(name))
            .filter(|path| !path.is_file())
            .collect()
    }

    /// What an operator is told when files are missing: which, and the remedy.
    pub fn missing_words(&self, missing: &[PathBuf]) -> String {
        let names: Vec<String> = missing
            .iter()
            .map(|path| path.display().to_string())
            .collect();
        if !self.are_hashed() && self.has_hashed_names_on_disk() {
            return format!(
                "the site's files are there with hashed names, but the hash file {} is not beside this binary, so every page would name files that are not there ({}): copy the hash.txt that `scripts/build` wrote beside the binary of the same build",
                self.hash_file.display(),
                names.join(", "),
            );
        }
        format!(
            "the site's files are not there ({}): set LEPTOS_SITE_ROOT to the directory the `target/site` of `scripts/build --release` was copied to, with the `hash.txt` of the same build beside the binary",
            names.join(", "),
        )
    }

    /// Whether the package directory holds a page file by a hashed name
    /// (`standmeet.<hash>.css`).
    fn has_hashed_names_on_disk(&self) -> bool {
        let Ok(entries) = std::fs::read_dir(&self.pkg_dir) else {
            return false;
        };
        let listed: Vec<String> = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect();
        self.page_files
            .iter()
            .any(|plain| listed.iter().any(|name| is_hashed_name_of(name, plain)))
    }

    /// The names in a hash file (`js: <hash>` lines, as scripts/build and cargo-leptos
    /// write them) for files called `output_name` served under `pkg_path`.
    pub fn from_hash_file(text: &str, output_name: &str, pkg_path: &str) -> SiteFiles {
        let mut hashed_names = HashMap::new();
        for line in text.lines() {
            let Some((kind, hash)) = line.trim().split_once(':') else {
                continue;
            };
            let (kind, hash) = (kind.trim(), hash.trim());
            // The hash is base64url, and so is the name a chunk's line gives before
            // it: anything else would make a path of its own.
            let base64url = |text: &str| {
                !text.is_empty()
                    && text
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            };
            match kind {
                "js" | "wasm" | "css" if base64url(hash) => {
                    hashed_names.insert(
                        format!("{output_name}.{kind}"),
                        format!("{output_name}.{hash}.{kind}"),
                    );
                }
                // A split build's loader of the wasm chunks, and each chunk (its line
                // says `<chunk>.<hash>`): files of this release named by their content.
                "split" if base64url(hash) => {
                    hashed_names.insert(
                        "__wasm_split.js".to_string(),
                        format!("__wasm_split.{hash}.js"),
                    );
                }
                "chunk" => {
                    if let Some((chunk, chunk_hash)) = hash.split_once('.')
                        && base64url(chunk)
                        && base64url(chunk_hash)
                    {
                        hashed_names.insert(format!("{chunk}.wasm"), format!("{hash}.wasm"));
                    }
                }
                _ => {}
            }
        }
        SiteFiles {
            pkg_path: pkg_path.to_string(),
            hashed_names,
            ..SiteFiles::default()
        }
    }

    /// The names the app's shell has under the package directory, as a page names
    /// them: its wasm and its JavaScript (hashed or not, as the build made them).
    pub fn shell_code(&self) -> (&str, &str) {
        match self.page_files.as_slice() {
            [_css, js, wasm] => (wasm, js),
            _ => ("", ""),
        }
    }

    /// Whether this release's files have hashed names.
    pub fn are_hashed(&self) -> bool {
        !self.hashed_names.is_empty()
    }

    /// The hashed name of a file requested by its plain name at `path`.
    fn hashed_path(&self, path: &str) -> Option<String> {
        let name = path.strip_prefix(&self.pkg_path)?.strip_prefix('/')?;
        let hashed = self.hashed_names.get(name)?;
        Some(format!("{}/{hashed}", self.pkg_path))
    }

    /// Whether `path` names a file under the package directory (`/pkg/…`).
    fn is_under_pkg(&self, path: &str) -> bool {
        !self.pkg_path.is_empty()
            && path
                .strip_prefix(&self.pkg_path)
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// The file `request` names under the site's root, as the build left it: its
    /// brotli or gzip copy when the request takes one and the build wrote it.
    async fn serve(&self, request: Request) -> Response {
        let files = ServeDir::new(&self.site_root)
            .precompressed_br()
            .precompressed_gzip();
        match files.oneshot(request).await {
            Ok(response) => response.into_response(),
            Err(never) => match never {},
        }
    }

    /// Whether `path` is one of this release's files by its hashed name.
    fn is_hashed_path(&self, path: &str) -> bool {
        path.strip_prefix(&self.pkg_path)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|name| self.hashed_names.values().any(|hashed| hashed == name))
    }
}

/// Whether `name` is `plain` with a hash in it: `standmeet.<hash>.css` for `standmeet.css`.
fn is_hashed_name_of(name: &str, plain: &str) -> bool {
    let Some((stem, kind)) = plain.rsplit_once('.') else {
        return false;
    };
    name.strip_prefix(stem)
        .and_then(|rest| rest.strip_prefix('.'))
        .and_then(|rest| rest.strip_suffix(kind))
        .and_then(|rest| rest.strip_suffix('.'))
        .is_some_and(|hash| !hash.is_empty() && !hash.contains('.'))
}

/// Serves the files under `/pkg/` (every other request goes on): a plain name as this
/// release's hashed file (checked again before each use), a hashed file to be kept for
/// a year, each compressed as the request takes it (see the module's notes).
pub async fn serve_site_files(
    State(files): State<Arc<SiteFiles>>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    if !files.is_under_pkg(path) {
        return next.run(request).await;
    }
    let cache_control = if let Some(hashed) = files.hashed_path(path) {
        if let Ok(uri) = hashed.parse::<Uri>() {
            *request.uri_mut() = uri;
        }
        Some(NO_CACHE)
    } else if files.is_hashed_path(path) {
        Some(IMMUTABLE)
    } else {
        None
    };
    let mut response = files.serve(request).await;
    let found = response.status().is_success();
    let headers = response.headers_mut();
    headers.insert(VARY, HeaderValue::from_static("accept-encoding"));
    match cache_control {
        // A plain name's file changes with each release: always asked again.
        Some(NO_CACHE) => {
            headers.insert(CACHE_CONTROL, HeaderValue::from_static(NO_CACHE));
        }
        Some(kept) if found => {
            headers.insert(CACHE_CONTROL, HeaderValue::from_static(kept));
        }
        _ => {}
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH_FILE: &str = "js: AbC-12_x\nwasm: Zz9\ncss: Q_w-e\n";

    #[test]
    fn the_hash_file_names_each_file() {
        let files = SiteFiles::from_hash_file(HASH_FILE, "standmeet", "/pkg");
        assert!(files.are_hashed());
        assert_eq!(
            files.hashed_path("/pkg/standmeet.css").as_deref(),
            Some("/pkg/standmeet.Q_w-e.css")
        );
        assert_eq!(
            files.hashed_path("/pkg/standmeet.wasm").as_deref(),
            Some("/pkg/standmeet.Zz9.wasm")
        );
        assert!(files.is_hashed_path("/pkg/standmeet.AbC-12_x.js"));
        assert!(!files.is_hashed_path("/pkg/standmeet.js"));
        assert!(!files.is_hashed_path("/pkg/standmeet.old.js"));
        assert_eq!(files.hashed_path("/favicon.svg"), None);
        assert_eq!(files.hashed_path("/pkg/other.css"), None);
    }

    #[test]
    fn a_split_builds_loader_and_chunks_are_files_named_by_their_content() {
        let text = format!(
            "{HASH_FILE}split: Lo4d\nchunk: split_tasks_1.Ch-1\nchunk: bad.name.x\nchunk: ../up.x\nmanifest: M4n\n"
        );
        let files = SiteFiles::from_hash_file(&text, "standmeet", "/pkg");
        assert!(files.is_hashed_path("/pkg/__wasm_split.Lo4d.js"));
        assert!(files.is_hashed_path("/pkg/split_tasks_1.Ch-1.wasm"));
        assert_eq!(
            files.hashed_path("/pkg/__wasm_split.js").as_deref(),
            Some("/pkg/__wasm_split.Lo4d.js")
        );
        assert!(!files.is_hashed_path("/pkg/split_tasks_1.wasm"));
        assert!(
            !files.is_hashed_path("/pkg/bad.name.x.wasm"),
            "a chunk name with a dot"
        );
        assert!(
            !files.is_hashed_path("/pkg/../up.x.wasm"),
            "a path of its own"
        );
        // The manifest is the server's to read, not a browser's to keep.
        assert!(!files.is_hashed_path("/pkg/__wasm_split_manifest.M4n.json"));
    }

    #[test]
    fn the_files_a_page_names_are_looked_for_under_the_site_root() {
        let site = tempfile::tempdir().unwrap();
        let mut options = LeptosOptions::builder()
            .output_name("standmeet")
            .site_root(site.path().to_string_lossy().to_string())
            .site_pkg_dir("pkg")
            .build();
        let files = SiteFiles::configure_with(&mut options, site.path().join("hash.txt"));
        assert_eq!(files.missing().len(), 3, "an empty site lacks all three");
        std::fs::create_dir(site.path().join("pkg")).unwrap();
        for name in ["standmeet.css", "standmeet.js", "standmeet.d.Zz9.ts"] {
            std::fs::write(site.path().join("pkg").join(name), "x").unwrap();
        }
        assert_eq!(
            files.missing(),
            [site.path().join("pkg/standmeet.wasm")],
            "the one still missing"
        );
        let words = files.missing_words(&files.missing());
        assert!(
            words.contains("standmeet.wasm") && words.contains("LEPTOS_SITE_ROOT"),
            "{words}"
        );
    }

    #[test]
    fn hashed_files_without_the_hash_file_are_a_missing_site_that_names_the_hash_file() {
        let site = tempfile::tempdir().unwrap();
        let mut options = LeptosOptions::builder()
            .output_name("standmeet")
            .site_root(site.path().to_string_lossy().to_string())
            .site_pkg_dir("pkg")
            .build();
        std::fs::create_dir(site.path().join("pkg")).unwrap();
        for name in [
            "standmeet.Q_w-e.css",
            "standmeet.AbC-12_x.js",
            "standmeet.Zz9.wasm",
        ] {
            std::fs::write(site.path().join("pkg").join(name), "x").unwrap();
        }
        let hash_file = site.path().join("hash.txt");
        let without = SiteFiles::configure_with(&mut options, hash_file.clone());
        assert_eq!(
            without.missing().len(),
            3,
            "the pages would name plain files"
        );
        let words = without.missing_words(&without.missing());
        assert!(
            words.contains("hash.txt") && words.contains(&hash_file.display().to_string()),
            "{words}"
        );
        std::fs::write(&hash_file, HASH_FILE).unwrap();
        let with = SiteFiles::configure_with(&mut options, hash_file);
        assert_eq!(with.missing(), Vec::<PathBuf>::new());
    }

    #[test]
    fn a_hashed_name_is_its_plain_name_with_one_more_part() {
        assert!(is_hashed_name_of("standmeet.G44-w_.css", "standmeet.css"));
        assert!(!is_hashed_name_of("standmeet.css", "standmeet.css"));
        assert!(!is_hashed_name_of("standmeet.d.x.ts", "standmeet.wasm"));
        assert!(!is_hashed_name_of("standmeet_bg.x.wasm", "standmeet.wasm"));
        assert!(!is_hashed_name_of("standmeet.a.b.css", "standmeet.css"));
    }

    #[test]
    fn a_malformed_line_names_nothing() {
        let files = SiteFiles::from_hash_file(
            "js: ../../etc\ncss:\nnonsense\nwasm: ok\n",
            "standmeet",
            "/pkg",
        );
        assert_eq!(files.hashed_path("/pkg/standmeet.js"), None);
        assert_eq!(files.hashed_path("/pkg/standmeet.css"), None);
        assert_eq!(
            files.hashed_path("/pkg/standmeet.wasm").as_deref(),
            Some("/pkg/standmeet.ok.wasm")
        );
        assert!(
            SiteFiles::from_hash_file("", "standmeet", "/pkg")
                .hashed_names
                .is_empty()
        );
    }
}
