//! The shape of the application crate and of the job engine, checked. In the
//! application, data flows one way between the top-level modules (`ui` → `api` → `ops`
//! ← `mcp`, `ops` → `domain` → `db`, with `startup` the only module that puts
//! everything together). In both crates no two files need each other, directly or
//! round a loop: the engine's layers are written in its crate documentation
//! (`crates/standmeet-jobs/src/lib.rs`), and its privacy is cargo's (its store,
//! signals, producer, claim and completer are not visible to the application).
//!
//! A dependency is a path that starts with `crate::` or `super::` in a file's code
//! (comments and `#[cfg(test)] mod tests` left out), resolved to the module file it
//! names. A parent's `pub use child::…` is not one: it re-exports, it does not use.
//! But a path through such a re-export (`super::JobClient`, which the engine's root
//! takes from its child `client`) is resolved to the file that defines what it names.
//! Run `cargo test --test it architecture -- --nocapture` to see the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules, lowest first. A module may use those of a lower rank only;
/// modules of one rank do not use each other.
const LAYERS: &[(&str, u8)] = &[
    ("model", 0),
    ("types", 0),
    ("causes", 0),
    ("db", 1),
    // The connections under the router: hyper and the router, nothing of ours.
    ("serving", 1),
    ("config", 2),
    // The domain's outgoing calls (mail, webhooks, boards) are spans of traces.
    ("telemetry", 3),
    ("domain", 4),
    ("security", 5),
    ("error", 5),
    ("assets", 5),
    ("live", 6),
    ("state", 7),
    ("ops", 8),
    ("api", 9),
    ("mcp", 9),
    ("ui", 10),
    ("startup", 11),
];

type ModulePath = Vec<String>;

/// The application's sources.
fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The job engine's sources.
fn engine_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/standmeet-jobs/src")
}

/// Every `.rs` file under `dir` (also what `reference` reads test ids from).
pub(crate) fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// `src/domain/mail/mod.rs` → `domain::mail`; `src/db/private_cluster.rs` → `db::private_cluster`; `lib.rs` → root.
fn module_of(src: &Path, file: &Path) -> ModulePath {
    let relative = file.strip_prefix(src).expect("under the crate's sources");
    let mut parts: ModulePath = relative
        .with_extension("")
        .components()
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        parts.clear();
    }
    parts
}

/// The code of a file without comments and without its unit tests.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths after each `crate::` / `super::` in `code`, as written (`super` kept as
/// the first segment); a `{…}` group gives one path per member.
fn written_paths(code: &str) -> Vec<ModulePath> {
    let mut paths = Vec::new();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(found) = code[from..].find(start) {
            let at = from + found;
            from = at + start.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| is_ident(c) || c == ':') {
                continue;
            }
            let head = start.trim_end_matches("::").to_string();
            let mut rest = &code[at + start.len()..];
            let mut prefix = vec![head];
            // `super::super::…` climbs further.
            while let Some(more) = rest.strip_prefix("super::") {
                prefix.push("super".into());
                rest = more;
            }
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for member in group[..end].split(',') {
                    let segments = segments_of(member.trim());
                    if !segments.is_empty() {
                        paths.push([prefix.clone(), segments].concat());
                    }
                }
            } else {
                let segments = segments_of(rest);
                // `a::b::{c, d}`: one path per member of the group after the path.
                let after = &rest[segments.join("::").len()..];
                match after.strip_prefix("::{") {
                    Some(group) => {
                        let end = group.find('}').unwrap_or(group.len());
                        let base = [prefix, segments].concat();
                        for member in group[..end].split(',') {
                            let member = segments_of(member.trim());
                            if !member.is_empty() {
                                paths.push([base.clone(), member].concat());
                            }
                        }
                    }
                    None => paths.push([prefix, segments].concat()),
                }
            }
        }
    }
    paths
}

/// `a::b::C…` → `[a, b, C]`, stopping at the first character that is not part of a
/// path.
fn segments_of(text: &str) -> ModulePath {
    let mut segments = Vec::new();
    let mut rest = text;
    loop {
        let length = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if length == 0 {
            break;
        }
        segments.push(rest[..length].to_string());
        match rest[length..].strip_prefix("::") {
            Some(more) if more.starts_with(is_ident) => rest = more,
            _ => break,
        }
    }
    segments
}

/// What each module re-exports: (module, name) → the path it re-exports, from its
/// `pub use path::Name;` and `pub use path::{A, B};` lines.
type ReExports = BTreeMap<(ModulePath, String), ModulePath>;

fn re_exports_of(me: &ModulePath, code: &str, found: &mut ReExports) {
    for visibility in ["pub use ", "pub(crate) use ", "pub(super) use "] {
        re_exports_with(me, code, visibility, found);
    }
}

/// [`re_exports_of`] for the statements that begin with `visibility`.
fn re_exports_with(me: &ModulePath, code: &str, visibility: &str, found: &mut ReExports) {
    let mut rest = code;
    while let Some(at) = rest.find(visibility) {
        rest = &rest[at + visibility.len()..];
        let Some(end) = rest.find(';') else { break };
        let statement = &rest[..end];
        let (base, names) = match statement.split_once("::{") {
            Some((base, group)) => (base.trim(), group.trim_end().trim_end_matches('}')),
            None => match statement.rsplit_once("::") {
                Some((base, name)) => (base.trim(), name),
                None => continue,
            },
        };
        let base: ModulePath = base.split("::").map(str::to_string).collect();
        for name in names
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
        {
            let (name, alias) = name.split_once(" as ").unwrap_or((name, name));
            let mut path = if base.first().is_some_and(|first| first == "crate") {
                base[1..].to_vec()
            } else {
                [me.clone(), base.clone()].concat()
            };
            path.push(name.trim().to_string());
            found.insert((me.clone(), alias.trim().to_string()), path);
        }
    }
}

/// The module file a written path names: its longest prefix that is a module, or,
/// when the path goes on through a name that module re-exports, the module file that
/// the re-export names.
fn resolve(
    me: &ModulePath,
    written: &ModulePath,
    modules: &BTreeSet<ModulePath>,
    re_exports: &ReExports,
) -> ModulePath {
    let mut base: ModulePath = Vec::new();
    let mut segments = written.iter().peekable();
    if segments.peek().is_some_and(|first| *first == "crate") {
        segments.next();
    } else {
        base = me.clone();
        while segments.peek().is_some_and(|first| *first == "super") {
            segments.next();
            base.pop();
        }
    }
    let full: ModulePath = base.into_iter().chain(segments.cloned()).collect();
    let longest = |full: &ModulePath| {
        (0..=full.len())
            .rev()
            .map(|length| full[..length].to_vec())
            .find(|prefix| modules.contains(prefix))
            .unwrap_or_default()
    };
    let module = longest(&full);
    // Through a re-export of one of the module's own children only: a module that
    // re-exports another's items (`ops` showing the domain's types to the doors) is a
    // door of its own, used as such.
    match full
        .get(module.len())
        .and_then(|name| re_exports.get(&(module.clone(), name.clone())))
    {
        Some(source) if source.starts_with(&module) => longest(source),
        _ => module,
    }
}

/// Module file → the module files it uses.
fn dependency_graph(src: &Path) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<ModulePath> = files.iter().map(|file| module_of(src, file)).collect();
    let codes: Vec<(ModulePath, String)> = files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).expect("a readable file");
            (module_of(src, file), code_of(&text))
        })
        .collect();
    let mut re_exports = ReExports::new();
    for (me, code) in &codes {
        re_exports_of(me, code, &mut re_exports);
    }
    let mut graph: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    for (me, code) in &codes {
        let uses = graph.entry(me.clone()).or_default();
        for written in written_paths(code) {
            // `use super::*` inside an inline module means the file itself.
            if written.last().is_some_and(|last| last.is_empty()) {
                continue;
            }
            let target = resolve(me, &written, &modules, &re_exports);
            if target != *me && !target.is_empty() {
                uses.insert(target);
            }
        }
    }
    graph
}

/// The cycles of `graph`: its strongly connected parts with more than one member.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan's algorithm, recursive: these graphs have a few hundred nodes at most.
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(walk: &mut Walk<'a>, node: &'a str) {
        let number = walk.index.len();
        walk.index.insert(node, number);
        walk.low.insert(node, number);
        walk.stack.push(node);
        walk.on_stack.insert(node);
        let graph = walk.graph;
        for next in graph.get(node).into_iter().flatten() {
            let next = next.as_str();
            if !walk.index.contains_key(next) {
                visit(walk, next);
                let low = walk.low[node].min(walk.low[next]);
                walk.low.insert(node, low);
            } else if walk.on_stack.contains(next) {
                let low = walk.low[node].min(walk.index[next]);
                walk.low.insert(node, low);
            }
        }
        if walk.low[node] == walk.index[node] {
            let mut part = Vec::new();
            while let Some(member) = walk.stack.pop() {
                walk.on_stack.remove(member);
                part.push(member.to_string());
                if member == node {
                    break;
                }
            }
            if part.len() > 1 {
                part.sort();
                walk.found.push(part);
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            visit(&mut walk, node);
        }
    }
    walk.found
}

/// The application's graph with every module cut to its first `depth` segments (0:
/// whole paths).
fn graph_at(depth: usize) -> BTreeMap<String, BTreeSet<String>> {
    crate_graph_at(&src_dir(), depth)
}

/// The graph of the crate whose sources are `src`, cut like [`graph_at`].
fn crate_graph_at(src: &Path, depth: usize) -> BTreeMap<String, BTreeSet<String>> {
    let cut = |path: &ModulePath| {
        let length = if depth == 0 {
            path.len()
        } else {
            depth.min(path.len())
        };
        path[..length].join("::")
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, targets) in dependency_graph(src) {
        if from.is_empty() {
            continue;
        }
        let from = cut(&from);
        for target in &targets {
            let target = cut(target);
            if target != from {
                graph.entry(from.clone()).or_default().insert(target);
            }
        }
        graph.entry(from).or_default();
    }
    graph
}

#[test]
fn the_reader_finds_what_it_checks() {
    // The parser this test relies on, on the shapes our code uses.
    let paths = written_paths(
        "use crate::domain::mail::{self, Mail};\nuse super::{completer, store};\nlet x = crate::api::when(at);\nuse super::super::ARGUMENTS;",
    );
    let as_text: Vec<String> = paths.iter().map(|path| path.join("::")).collect();
    assert_eq!(
        as_text,
        [
            "crate::domain::mail::self",
            "crate::domain::mail::Mail",
            "crate::api::when",
            "super::completer",
            "super::store",
            "super::super::ARGUMENTS",
        ]
    );
    let graph = graph_at(1);
    assert!(
        graph["api"].contains("ops")
            && graph["ops"].contains("domain")
            && graph["startup"].contains("api"),
        "the graph sees known edges: {graph:?}"
    );
}

#[test]
fn data_flows_one_way_between_the_top_level_modules() {
    let rank: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let graph = graph_at(1);
    let mut wrong = Vec::new();
    for (from, targets) in &graph {
        println!(
            "{from} → {}",
            targets.iter().cloned().collect::<Vec<_>>().join(", ")
        );
        let Some(&from_rank) = rank.get(from.as_str()) else {
            wrong.push(format!("{from} is not in LAYERS: give it its place"));
            continue;
        };
        for target in targets {
            match rank.get(target.as_str()) {
                Some(&target_rank) if target_rank < from_rank => {}
                Some(_) => wrong.push(format!("{from} uses {target}, which is not below it")),
                None => wrong.push(format!("{target} is not in LAYERS: give it its place")),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the layers are crossed:\n{}",
        wrong.join("\n")
    );
    assert!(cycles(&graph).is_empty());
}

#[test]
fn no_two_files_need_each_other() {
    let graph = graph_at(0);
    let found = cycles(&graph);
    assert!(
        found.is_empty(),
        "files that use each other (directly or round a loop): {found:?}"
    );
}

/// What a door may take from the domain directly rather than through an operation: who
/// is signed in (the session's admin, which the guard and sign-in speak of).
const DOORS_MAY_USE: &[&str] = &["domain::admins"];

#[test]
fn the_doors_reach_the_domain_only_through_operations() {
    // A server function (`api`) and a tool (`mcp`) are adapters of one operation each
    // (`ops`): what they ask of the domain they ask through it, so the page and the
    // tool cannot drift apart.
    let graph = graph_at(2);
    let mut wrong = Vec::new();
    for (from, targets) in &graph {
        if !(from.starts_with("api") || from.starts_with("mcp")) {
            continue;
        }
        for target in targets {
            if target.starts_with("domain") && !DOORS_MAY_USE.contains(&target.as_str()) {
                wrong.push(format!("{from} uses {target}: go through ops"));
            }
        }
    }
    assert!(
        graph.keys().any(|from| from.starts_with("ops::")),
        "the graph sees the operations: {graph:?}"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_reader_follows_re_exports() {
    // The engine's files name each other mostly through its root's re-exports
    // (`use super::{JobClient, JobId}`): those count as uses of the defining file.
    let graph = crate_graph_at(&engine_dir(), 0);
    assert!(
        graph["kind"].contains("client") && graph["insert"].contains("kind"),
        "the graph sees known edges through re-exports: {graph:?}"
    );
}

#[test]
fn no_two_files_of_the_job_engine_need_each_other() {
    // The layers the engine's crate documentation draws: a file uses only files below
    // it, so none is reached again round a loop (a tie as small as a constant made
    // fourteen of them one knot once).
    let graph = crate_graph_at(&engine_dir(), 0);
    for (from, targets) in &graph {
        println!(
            "{from} → {}",
            targets.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    assert!(
        graph.len() > 20,
        "the graph sees the engine's files: {graph:?}"
    );
    let found = cycles(&graph);
    assert!(
        found.is_empty(),
        "engine files that use each other (directly or round a loop): {found:?}"
    );
}
