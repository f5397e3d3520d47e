//! `standmeet-wasm-split INPUT.wasm PKG_DIR NAME`: the step of `scripts/build` that
//! cuts the browser's wasm along the app's split points (each page is a lazy route,
//! `src/ui/lazy_pages.rs`), with the library `cargo leptos build --split` uses. It
//! leaves in `PKG_DIR`:
//!
//! - `NAME_split.wasm`: the app's shell, for wasm-bindgen to make `NAME.js` from;
//! - one `.wasm` per page and per piece of code that pages share, fetched when a page
//!   first needs it;
//! - `__wasm_split.js`, the loader the shell imports, which imports `./NAME.js` back;
//! - `__wasm_split_manifest.json`: for each split point the files it needs, from which
//!   the server names them in a page's `<head>` so that they load beside the shell.
//!
//! The names are the plain ones; `scripts/lib/name-files.js` then gives each its
//! content's hash.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, pkg_dir, name] = args.as_slice() else {
        eprintln!("usage: standmeet-wasm-split INPUT.wasm PKG_DIR NAME");
        return ExitCode::from(2);
    };
    match split(Path::new(input), Path::new(pkg_dir), name) {
        Ok(files) => {
            eprintln!("wasm split: {files} files in {pkg_dir}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("wasm split: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Splits `input` into `pkg_dir`; answers how many chunk files it wrote.
fn split(input: &Path, pkg_dir: &Path, name: &str) -> Result<usize, String> {
    let input_wasm =
        std::fs::read(input).map_err(|e| format!("cannot read {}: {e}", input.display()))?;
    let main_out: PathBuf = pkg_dir.join(format!("{name}_split.wasm"));
    let main_module = format!("./{name}.js");
    let mut options = wasm_split_cli_support::Options::new(&input_wasm);
    options.output_dir = pkg_dir;
    options.main_out_path = &main_out;
    options.main_module = &main_module;
    options.link_name = "./__wasm_split.js";
    let split = wasm_split_cli_support::transform(options)
        .map_err(|e| format!("cannot split {}: {e:#}", input.display()))?;
    let manifest = serde_json::to_string_pretty(&split.prefetch_map)
        .map_err(|e| format!("cannot write the manifest: {e}"))?;
    let manifest_path = pkg_dir.join("__wasm_split_manifest.json");
    std::fs::write(&manifest_path, manifest)
        .map_err(|e| format!("cannot write {}: {e}", manifest_path.display()))?;
    Ok(split.split_modules.len())
}
