//! Entry bodies are Markdown (docs/corpus.md), as an Obsidian vault keeps them: rendered
//! to HTML for the entry page and the admin's preview, sanitized whatever the note
//! carries; and read as plain text for the index and the snippets, so that search
//! finds words, not markup.
//!
//! pulldown-cmark parses (with Obsidian's `[[wikilinks]]`), ammonia sanitizes: no
//! script, style, event attribute or `javascript:` link survives. What is Obsidian's
//! own: `%%comments%%` are dropped, `![[embeds]]` of files are dropped, and a
//! `[[Note]]`, `[[Note|text]]` or `[[Note#Heading]]` links to that note's entry page
//! (at that heading: every heading gets an id, [`heading_anchor`]) when the reader may
//! see it, and is its text otherwise.

use std::borrow::Cow;

use pulldown_cmark::{Event, LinkType, Options, Parser, Tag, TagEnd};

fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TABLES
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_WIKILINKS
}

/// `markdown` as sanitized HTML; `link_for` answers where a wikilink's note is for this
/// reader (given the note's name, without `#heading`), or `None` to show its text.
pub fn to_html(markdown: &str, link_for: impl Fn(&str) -> Option<String>) -> String {
    let source = without_comments(markdown);
    let mut skipping_embed = 0usize;
    let mut dropped_links = Vec::new();
    let events = Parser::new_ext(&source, options()).filter_map(|event| match event {
        Event::Start(Tag::Image {
            link_type: LinkType::WikiLink { .. },
            ..
        }) => {
            skipping_embed += 1;
            None
        }
        Event::End(TagEnd::Image) if skipping_embed > 0 => {
            skipping_embed -= 1;
            None
        }
        _ if skipping_embed > 0 => None,
        Event::Start(Tag::Link {
            link_type: LinkType::WikiLink { has_pothole },
            dest_url,
            title,
            id,
        }) => {
            let (note, heading) = match dest_url.split_once('#') {
                Some((note, heading)) => (note.trim(), Some(heading)),
                None => (dest_url.trim(), None),
            };
            match link_for(note) {
                Some(href) => {
                    dropped_links.push(false);
                    let href = match heading.map(heading_anchor).filter(|a| !a.is_empty()) {
                        Some(anchor) => format!("{href}#{HEADING_ID_PREFIX}{anchor}"),
                        None => href,
                    };
                    Some(Event::Start(Tag::Link {
                        link_type: LinkType::WikiLink { has_pothole },
                        dest_url: href.into(),
                        title,
                        id,
                    }))
                }
                None => {
                    dropped_links.push(true);
                    None
                }
            }
        }
        Event::End(TagEnd::Link) => match dropped_links.pop() {
            Some(true) => None,
            _ => Some(Event::End(TagEnd::Link)),
        },
        other => Some(other),
    });
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, with_heading_ids(events.collect()).into_iter());
    sanitizer().clean(&html).to_string()
}

/// What every id in a rendered body starts with (the sanitizer adds it to any id a
/// note carries too), so a note's ids cannot stand for the page's own elements.
const HEADING_ID_PREFIX: &str = "h-";

/// A heading's anchor, as `[[Note#Heading]]` names it and its id carries it: lowercase,
/// letters and digits of any script kept, spaces and dashes as one dash, the rest left
/// out ("Low tide, at six" → "low-tide-at-six").
pub fn heading_anchor(heading: &str) -> String {
    let mut anchor = String::new();
    for c in heading.trim().chars() {
        if c.is_alphanumeric() {
            anchor.extend(c.to_lowercase());
        } else if (c.is_whitespace() || c == '-' || c == '_') && !anchor.ends_with('-') {
            anchor.push('-');
        }
    }
    anchor.trim_matches('-').to_string()
}

/// `events` with an id on every heading, from its text; a second heading of the same
/// text gets `-1`, a third `-2`, as on code hosts.
fn with_heading_ids(mut events: Vec<Event<'_>>) -> Vec<Event<'_>> {
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    let mut at = 0;
    while at < events.len() {
        if let Event::Start(Tag::Heading { .. }) = events[at] {
            let mut text = String::new();
            for event in &events[at + 1..] {
                match event {
                    Event::End(TagEnd::Heading(_)) => break,
                    Event::Text(part) | Event::Code(part) => text.push_str(part),
                    _ => {}
                }
            }
            let anchor = heading_anchor(&text);
            if !anchor.is_empty() {
                let count = seen.entry(anchor.clone()).or_default();
                let unique = match *count {
                    0 => anchor,
                    n => format!("{anchor}-{n}"),
                };
                *count += 1;
                if let Event::Start(Tag::Heading { id, .. }) = &mut events[at] {
                    *id = Some(format!("{HEADING_ID_PREFIX}{unique}").into());
                }
            }
        }
        at += 1;
    }
    events
}

/// The names of the notes the `[[wikilinks]]` of `markdown` point at (embeds and
/// comments aside), lowercased, each once.
pub fn wikilink_targets(markdown: &str) -> Vec<String> {
    let source = without_comments(markdown);
    let mut names: Vec<String> = Parser::new_ext(&source, options())
        .filter_map(|event| match event {
            Event::Start(Tag::Link {
                link_type: LinkType::WikiLink { .. },
                dest_url,
                ..
            }) => Some(
                dest_url
                    .split('#')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_lowercase(),
            ),
            _ => None,
        })
        .filter(|name| !name.is_empty())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// ammonia's safe defaults (no script, style or event attributes), links only to http,
/// https, mailto and this site's paths (ammonia's own list also lets tel:, sms:,
/// webcal:, ftp: and more through, which a note has no business opening), and links
/// marked as not vouched for.
fn sanitizer() -> ammonia::Builder<'static> {
    let mut builder = ammonia::Builder::default();
    builder.url_schemes(["http", "https", "mailto"].into_iter().collect());
    builder.link_rel(Some("noopener noreferrer nofollow"));
    // Headings keep their ids, which `[[Note#Heading]]` links to.
    for heading in ["h1", "h2", "h3", "h4", "h5", "h6"] {
        builder.add_tag_attributes(heading, ["id"]);
    }
    builder.id_prefix(Some(HEADING_ID_PREFIX));
    builder
}

/// The words of `markdown` without its markup: what the index holds and snippets show.
/// A wikilink counts as its text; embeds, comments and raw HTML are left out.
pub fn plain_text(markdown: &str) -> String {
    let source = without_comments(markdown);
    let mut text = String::with_capacity(source.len());
    let mut skipping_embed = 0usize;
    for event in Parser::new_ext(&source, options()) {
        match event {
            Event::Start(Tag::Image {
                link_type: LinkType::WikiLink { .. },
                ..
            }) => skipping_embed += 1,
            Event::End(TagEnd::Image) if skipping_embed > 0 => skipping_embed -= 1,
            _ if skipping_embed > 0 => {}
            Event::Text(words) | Event::Code(words) => text.push_str(&words),
            Event::SoftBreak | Event::HardBreak => text.push('\n'),
            Event::End(
                TagEnd::Paragraph
                | TagEnd::Heading(_)
                | TagEnd::Item
                | TagEnd::CodeBlock
                | TagEnd::TableCell
                | TagEnd::BlockQuote(_),
            ) if !text.ends_with('\n') => text.push('\n'),
            _ => {}
        }
    }
    text.trim_end().to_string()
}

/// `markdown` without Obsidian's `%%comments%%`. A `%%` opens a comment and the next
/// one closes it, except inside inline code or a code block, where Obsidian leaves `%%`
/// as it is (`printf("%d%%")`); an unclosed `%%` hides the rest of the text. The code is
/// found by parsing, so a comment is never paired across code.
pub fn without_comments(markdown: &str) -> Cow<'_, str> {
    if !markdown.contains("%%") {
        return Cow::Borrowed(markdown);
    }
    let code = code_ranges(markdown);
    // The `%%`s are met in order, so the code range that may hold the next one is at or
    // after the one that held the last: one pass over both lists, whatever the note.
    let mut next_code = 0;
    let mut in_code = |at: usize| {
        while code.get(next_code).is_some_and(|range| range.end <= at) {
            next_code += 1;
        }
        code.get(next_code)
            .filter(|range| range.start <= at)
            .cloned()
    };
    let mut kept = String::with_capacity(markdown.len());
    // Where the text still to copy starts, and where a comment opened, if one did.
    let mut copy_from = 0;
    let mut opened: Option<usize> = None;
    let mut search_from = 0;
    while let Some(found) = markdown[search_from..].find("%%") {
        let at = search_from + found;
        if let Some(range) = in_code(at) {
            search_from = range.end;
            continue;
        }
        match opened.take() {
            None => {
                kept.push_str(&markdown[copy_from..at]);
                opened = Some(at);
            }
            Some(_) => copy_from = at + 2,
        }
        search_from = at + 2;
    }
    if opened.is_none() {
        kept.push_str(&markdown[copy_from..]);
    }
    Cow::Owned(kept)
}

/// The byte ranges of `markdown`'s inline code and code blocks, in order.
fn code_ranges(markdown: &str) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut block_start = None;
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        match event {
            Event::Code(_) => ranges.push(range),
            Event::Start(Tag::CodeBlock(_)) => block_start = Some(range),
            Event::End(TagEnd::CodeBlock) => {
                if let Some(start) = block_start.take() {
                    ranges.push(start.start..range.end.max(start.end));
                }
            }
            _ => {}
        }
    }
    // In document order already; sorted all the same, as the pass above relies on it.
    ranges.sort_by_key(|range| range.start);
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_links(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn script_event_attributes_and_javascript_links_render_inert() {
        let html = to_html(
            "Hi <script>alert(1)</script>\n\n<img src=x onerror=\"alert(2)\">\n\n[click](javascript:alert(3)) <a href=\"javascript:alert(4)\">a</a> <style>body{}</style>",
            no_links,
        );
        for bad in ["<script", "onerror", "javascript:", "<style", "alert(1)"] {
            assert!(!html.contains(bad), "{bad} in {html}");
        }
        assert!(html.contains("Hi"), "{html}");
    }

    #[test]
    fn links_go_only_to_http_https_mailto_and_this_site() {
        let html = to_html(
            "[web](https://example.com) [plain](http://example.com/a) [mail](mailto:owner@example.com) [here](/entries/3) [call](tel:+15551234) [text](sms:+15551234) [cal](webcal://example.com/c.ics) [ftp](ftp://example.com/f) [data](data:text/html,hi)",
            no_links,
        );
        for kept in [
            "https://example.com",
            "http://example.com/a",
            "mailto:owner@example.com",
            "/entries/3",
        ] {
            assert!(
                html.contains(&format!("href=\"{kept}\"")),
                "{kept} in {html}"
            );
        }
        for gone in ["tel:", "sms:", "webcal:", "ftp:", "data:"] {
            assert!(!html.contains(gone), "{gone} in {html}");
        }
        assert!(
            html.contains("call") && html.contains("cal"),
            "the text stays: {html}"
        );
    }

    #[test]
    fn markdown_renders_and_links_are_marked() {
        let html = to_html(
            "# Title\n\nSome **bold** and [a site](https://example.com).",
            no_links,
        );
        assert!(html.contains(r#"<h1 id="h-title">Title</h1>"#), "{html}");
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(
            html.contains(
                r#"<a href="https://example.com" rel="noopener noreferrer nofollow">a site</a>"#
            ),
            "{html}"
        );
    }

    #[test]
    fn wikilinks_link_where_the_reader_may_go_and_are_text_elsewhere() {
        let link_for = |note: &str| (note == "Seen").then(|| "/entries/7".to_string());
        let html = to_html(
            "See [[Seen]], [[Seen#Part|that part]], [[Hidden]] and [[Hidden|a secret]].",
            link_for,
        );
        assert!(
            html.contains(r#"<a href="/entries/7" rel="noopener noreferrer nofollow">Seen</a>"#),
            "{html}"
        );
        assert!(
            html.contains(
                r#"<a href="/entries/7#h-part" rel="noopener noreferrer nofollow">that part</a>"#
            ),
            "{html}"
        );
        assert!(html.contains("Hidden and a secret."), "{html}");
        assert_eq!(html.matches("<a ").count(), 2, "{html}");
        assert_eq!(
            wikilink_targets("[[Seen]] [[seen#x|y]] [[Hidden]] ![[Embed]] %%[[Comment]]%%"),
            ["hidden", "seen"]
        );
    }

    #[test]
    fn headings_get_ids_and_a_wikilink_to_a_heading_lands_on_it() {
        let link = |note: &str| (note == "Harbour").then(|| "/entries/7".to_string());
        let html = to_html(
            "# Low tide, at six\n\n## Boats\n\n## Boats\n\nSee [[Harbour#Low tide, at six|the tide]] and [[Harbour#Nowhere]].",
            link,
        );
        assert!(html.contains(r#"<h1 id="h-low-tide-at-six">"#), "{html}");
        assert!(html.contains(r#"<h2 id="h-boats">"#), "{html}");
        assert!(html.contains(r#"<h2 id="h-boats-1">"#), "{html}");
        assert!(
            html.contains(r#"href="/entries/7#h-low-tide-at-six""#),
            "{html}"
        );
        assert!(html.contains(r#"href="/entries/7#h-nowhere""#), "{html}");
        assert_eq!(
            heading_anchor("  Tōkyō 東京 -- Notes! "),
            "tōkyō-東京-notes"
        );
        // An id a note writes itself cannot take one of the page's own.
        let raw = to_html("<h2 id=\"main\">Raw</h2>", link);
        assert!(raw.contains(r#"id="h-main""#), "{raw}");
    }

    #[test]
    fn comments_and_embeds_are_dropped() {
        let markdown =
            "Before %%a private note%% after.\n\n![[diagram.png]] and ![[Other note]] gone.";
        let html = to_html(markdown, no_links);
        assert!(!html.contains("private"), "{html}");
        assert!(!html.contains("diagram"), "{html}");
        assert!(!html.contains("Other note"), "{html}");
        assert!(html.contains("Before  after."), "{html}");
        let text = plain_text(markdown);
        assert!(
            !text.contains("private") && !text.contains("diagram"),
            "{text}"
        );
        // An unclosed %% hides the rest, as in Obsidian.
        assert_eq!(plain_text("Sale: 50%% off, secretly"), "Sale: 50");
    }

    #[test]
    fn percent_signs_in_code_are_literal_and_a_comment_after_code_is_still_dropped() {
        let markdown = "Print with `printf(\"%d%%\")` today. %%launch codename: heron%% Done.\n\n```\nlet x = \"100%%\";\n```\n\nAfter %%second secret%% end.";
        for text in [plain_text(markdown), to_html(markdown, no_links)] {
            assert!(!text.contains("heron"), "{text}");
            assert!(!text.contains("second secret"), "{text}");
            assert!(text.contains("%d%%"), "{text}");
            assert!(text.contains("100%%"), "{text}");
            assert!(text.contains("Done.") && text.contains("end."), "{text}");
        }
        // A comment spanning paragraphs goes whole; one opened in code is no comment.
        assert_eq!(without_comments("a %%one\n\ntwo%% b `%%` c"), "a  b `%%` c");
    }

    /// A megabyte of inline code and comments: 77,000 code spans and 230,000 `%%`. Looking
    /// up every `%%` among every span took about 10¹⁰ steps (minutes); one pass over both
    /// takes about as long as parsing the text. The limit is that gap, not a speed.
    #[test]
    fn stripping_comments_takes_one_pass_however_many_code_spans_a_note_has() {
        let unit = "`a%%b` %%x%% ";
        let note = unit.repeat(1_000_000 / unit.len());
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(without_comments(&note).into_owned());
        });
        let stripped = finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("stripped within a minute");
        assert!(!stripped.contains('x'), "every comment dropped");
        assert_eq!(stripped.matches("`a%%b`").count(), 1_000_000 / unit.len());
    }

    #[test]
    fn the_plain_text_is_the_words_without_markup() {
        let text = plain_text(
            "# Tide tables\n\nLow tide at **six**, see [[Harbour|the harbour]] and `code`.\n\n- one\n- two <b>html</b>",
        );
        assert_eq!(
            text,
            "Tide tables\nLow tide at six, see the harbour and code.\none\ntwo html"
        );
    }
}
