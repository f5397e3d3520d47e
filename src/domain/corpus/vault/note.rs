//! A note from its bytes: front matter (hostile YAML refused before a tree is built),
//! title, body, and the entry it makes.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::super::markdown::without_comments;
use super::super::{MAX_BODY_CHARS, MAX_TITLE_CHARS, Status, Visibility};

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
}
