//! The engine's door, read from its rustdoc JSON: which other crates' types and traits
//! its public items name. It speaks its own types, std's and a few others': the
//! driver's handles it shares with the application (a pool, a connection, their
//! options, so that a job commits in the caller's transaction), the data types of its
//! rows (time, JSON, a time zone), serde and schemars. No error, metric or anyhow
//! type of another crate goes through it.
//!
//! `door.txt` beside this file lists every such name. A change to the door that adds
//! or drops one fails here until that list is written again (`UPDATE_GOLDEN=1`), so
//! the door cannot widen unseen. The JSON is made with the stable toolchain's rustdoc
//! (`RUSTC_BOOTSTRAP=1` lets it write its unstable JSON format), in a target directory
//! of its own, with the features the application uses (`engine`, `schemars`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Crates whose names must never be part of the door.
const NEVER: &[&str] = &["anyhow", "prometheus_client"];

/// Crates that are the language's own: not listed.
const STD: &[&str] = &["core", "alloc", "std"];

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs rustdoc on the engine and answers its JSON.
fn rustdoc_json() -> Value {
    let workspace = crate_dir().join("../..");
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => workspace.join("target"),
    }
    .join("door");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(&workspace)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTDOCFLAGS")
        .args([
            "rustdoc",
            "-p",
            "standmeet-jobs",
            "--lib",
            "--features",
            "schemars",
            "--quiet",
            "--",
            "-Z",
            "unstable-options",
            "--output-format",
            "json",
        ])
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "rustdoc could not write the engine's JSON:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let file = target.join("doc/standmeet_jobs.json");
    let text = std::fs::read_to_string(&file).expect("rustdoc wrote its JSON");
    serde_json::from_str(&text).expect("rustdoc's JSON parses")
}

/// Every path (`crate::module::Name`) of another crate that a public item of the
/// engine names, with the items that name it. For an implementation of another
/// crate's trait only the trait is counted: its methods' signatures are that crate's.
fn foreign_names(doc: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let paths = &doc["paths"];
    let crates = &doc["external_crates"];
    let name_of = |id: &Value| -> Option<String> {
        let summary = &paths[id.as_u64()?.to_string()];
        let crate_id = summary["crate_id"].as_u64()?;
        if crate_id == 0 {
            return None;
        }
        let mut segments: Vec<&str> = summary["path"]
            .as_array()?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        // The crate's name as it is spelt where it is used (`sqlx_core` for sqlx's types).
        let crate_name = crates[crate_id.to_string()]["name"].as_str()?;
        if let Some(first) = segments.first_mut() {
            *first = crate_name;
        }
        Some(segments.join("::"))
    };
    fn walk(
        value: &Value,
        owner: &str,
        name_of: &dyn Fn(&Value) -> Option<String>,
        found: &mut BTreeMap<String, BTreeSet<String>>,
    ) {
        match value {
            Value::Object(map) => {
                // A path to a type or a trait: `{"path": "…", "id": 12, "args": …}`.
                if map.get("path").is_some_and(Value::is_string)
                    && let Some(id) = map.get("id")
                    && let Some(name) = name_of(id)
                {
                    found.entry(name).or_default().insert(owner.to_string());
                }
                for item in map.values() {
                    walk(item, owner, name_of, found);
                }
            }
            Value::Array(items) => {
                for item in items {
                    walk(item, owner, name_of, found);
                }
            }
            _ => {}
        }
    }
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let index = doc["index"].as_object().expect("an index");
    // The methods and types of an implementation of another crate's trait are items of
    // their own in the index: left out with it.
    // Only their methods: an associated type (`type Error = …`) is ours to choose.
    let of_foreign_traits: BTreeSet<u64> = index
        .values()
        .filter_map(|item| item["inner"].get("impl"))
        .filter(|implementation| {
            implementation["trait"]
                .get("id")
                .is_some_and(|id| name_of(id).is_some())
        })
        .flat_map(|implementation| {
            implementation["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|id| id.as_u64())
        .filter(|id| index[&id.to_string()]["inner"].get("function").is_some())
        .collect();
    for item in index.values() {
        if item["crate_id"].as_u64() != Some(0)
            || item["id"]
                .as_u64()
                .is_some_and(|id| of_foreign_traits.contains(&id))
        {
            continue;
        }
        let owner = item["name"].as_str().unwrap_or("an impl");
        let inner = &item["inner"];
        if let Some(implementation) = inner.get("impl") {
            // What every type gets (auto traits, blanket implementations) is no
            // choice of ours.
            if !implementation["blanket_impl"].is_null()
                || implementation["is_synthetic"].as_bool() == Some(true)
            {
                continue;
            }
            let trait_ = &implementation["trait"];
            if let Some(name) = trait_.get("id").and_then(&name_of) {
                let for_type = implementation["for"]
                    .get("resolved_path")
                    .and_then(|path| path["path"].as_str())
                    .unwrap_or("a type");
                let owner = format!("impl for {for_type}");
                found.entry(name).or_default().insert(owner.clone());
                // Its bounds and the trait's arguments are ours to choose
                // (`impl<E: Into<anyhow::Error>> From<E>` names anyhow).
                walk(&implementation["generics"], &owner, &name_of, &mut found);
                walk(&trait_["args"], &owner, &name_of, &mut found);
                walk(&implementation["for"], &owner, &name_of, &mut found);
                continue;
            }
        }
        // A re-export of another crate's item (`pub use other::Item`) names it by id.
        if let Some(name) = inner
            .get("use")
            .and_then(|re_export| name_of(&re_export["id"]))
        {
            found.entry(name).or_default().insert(owner.to_string());
        }
        walk(inner, owner, &name_of, &mut found);
    }
    found
}

fn crate_of(path: &str) -> &str {
    path.split("::").next().unwrap_or(path)
}

#[test]
fn the_door_names_only_what_door_txt_lists() {
    let doc = rustdoc_json();
    let found = foreign_names(&doc);
    let never: Vec<String> = found
        .iter()
        .filter(|(path, _)| NEVER.contains(&crate_of(path)))
        .map(|(path, owners)| format!("{path} (in {owners:?})"))
        .collect();
    assert!(
        never.is_empty(),
        "the engine's public items name other crates' errors or metrics: {never:?}"
    );
    let errors: Vec<&String> = found
        .keys()
        .filter(|path| path.starts_with("sqlx") && path.contains("::error::"))
        .collect();
    assert!(
        errors.is_empty(),
        "the driver's error is the source of the engine's own, never part of the door: {errors:?}"
    );
    let listed: String = found
        .keys()
        .filter(|path| !STD.contains(&crate_of(path)))
        .map(|path| format!("{path}\n"))
        .collect();
    let golden = crate_dir().join("tests/door.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &listed).expect("door.txt is writable");
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_default();
    assert!(
        listed == expected,
        "the door names other crates' items that {} does not list, or no longer names some \
         it lists (check the change, then UPDATE_GOLDEN=1):\n{}",
        display(&golden),
        difference(&expected, &listed)
    );
}

fn display(path: &Path) -> String {
    path.strip_prefix(crate_dir())
        .unwrap_or(path)
        .display()
        .to_string()
}

fn difference(expected: &str, found: &str) -> String {
    let expected: BTreeSet<&str> = expected.lines().collect();
    let found: BTreeSet<&str> = found.lines().collect();
    let added = found.difference(&expected).map(|line| format!("+ {line}"));
    let dropped = expected.difference(&found).map(|line| format!("- {line}"));
    added.chain(dropped).collect::<Vec<_>>().join("\n")
}
