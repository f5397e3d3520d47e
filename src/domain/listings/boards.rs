//! What job boards answer, read into one shape: the Greenhouse boards API, the Lever
//! postings API, and RSS 2.0 / Atom feeds (feed-rs). Also the canonical form of a
//! posting's URL, which makes the same posting on two boards one listing.

use serde::Deserialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use url::Url;

use super::SourceKind;

/// One posting as a board lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoardListing {
    /// The posting's id on its board (a Greenhouse or Lever id, a feed entry's id).
    pub external_id: String,
    pub title: String,
    pub company: Option<String>,
    pub location: Option<String>,
    pub url: Url,
    pub posted_at: Option<OffsetDateTime>,
}

/// What a board's answer gave: the postings, and how many entries could not be used
/// (no title, or no http(s) link).
#[derive(Debug, Default)]
pub struct BoardPage {
    pub listings: Vec<BoardListing>,
    pub skipped: usize,
}

/// A board's answer that is not what its kind promises.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

/// At most this many postings are taken from one answer.
pub const MAX_LISTINGS_PER_FETCH: usize = 5_000;

/// Reads `body`, the answer of a board of `kind` at `url`.
pub fn parse(kind: SourceKind, body: &[u8], url: &Url) -> Result<BoardPage, ParseError> {
    let mut page = match kind {
        SourceKind::Greenhouse => greenhouse(body)?,
        SourceKind::Lever => lever(body)?,
        SourceKind::Rss => feed(body, url)?,
    };
    // One posting per id, the first as the board lists it.
    let mut seen = std::collections::HashSet::new();
    page.listings
        .retain(|listing| seen.insert(listing.external_id.clone()));
    page.listings.truncate(MAX_LISTINGS_PER_FETCH);
    Ok(page)
}

fn json_error(what: &str, err: serde_json::Error) -> ParseError {
    ParseError(format!("the answer is not {what}: {err}"))
}

/// Keeps a posting only when it has a title and an absolute http(s) URL.
fn usable(page: &mut BoardPage, listing: Option<BoardListing>) {
    match listing {
        Some(listing) if !listing.title.is_empty() => page.listings.push(listing),
        _ => page.skipped += 1,
    }
}

fn http_url(raw: &str, base: Option<&Url>) -> Option<Url> {
    let url = match base {
        Some(base) => base.join(raw.trim()).ok()?,
        None => Url::parse(raw.trim()).ok()?,
    };
    matches!(url.scheme(), "http" | "https").then_some(url)
}

/// One line of text: whitespace runs become one space, control characters (which
/// PostgreSQL may not store, like NUL) go.
fn clean(text: &str) -> String {
    text.split_whitespace()
        .map(|word| word.chars().filter(|c| !c.is_control()).collect::<String>())
        .filter(|word| !word.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn non_empty(text: Option<&str>) -> Option<String> {
    text.map(clean).filter(|text| !text.is_empty())
}

/// `GET https://boards-api.greenhouse.io/v1/boards/<board>/jobs`.
fn greenhouse(body: &[u8]) -> Result<BoardPage, ParseError> {
    #[derive(Deserialize)]
    struct Board {
        jobs: Vec<Job>,
    }
    #[derive(Deserialize)]
    struct Job {
        id: serde_json::Value,
        title: Option<String>,
        absolute_url: Option<String>,
        location: Option<Location>,
        updated_at: Option<String>,
        first_published: Option<String>,
        company_name: Option<String>,
    }
    #[derive(Deserialize)]
    struct Location {
        name: Option<String>,
    }
    let board: Board =
        serde_json::from_slice(body).map_err(|err| json_error("Greenhouse boards JSON", err))?;
    let mut page = BoardPage::default();
    for job in board.jobs {
        let listing = (|| {
            Some(BoardListing {
                external_id: id_text(&job.id)?,
                title: clean(job.title.as_deref()?),
                company: non_empty(job.company_name.as_deref()),
                location: non_empty(job.location.as_ref().and_then(|l| l.name.as_deref())),
                url: http_url(job.absolute_url.as_deref()?, None)?,
                // When it was first published, when the board says; else its last change.
                posted_at: job
                    .first_published
                    .as_deref()
                    .or(job.updated_at.as_deref())
                    .and_then(|at| OffsetDateTime::parse(at, &Rfc3339).ok()),
            })
        })();
        usable(&mut page, listing);
    }
    Ok(page)
}

/// An id given as a number or a string.
fn id_text(id: &serde_json::Value) -> Option<String> {
    match id {
        serde_json::Value::Number(number) => Some(number.to_string()),
        serde_json::Value::String(text) => clean_id(text),
        _ => None,
    }
}

/// The longest posting id kept; a longer one is cut (ids are compared, never shown).
const MAX_ID_CHARS: usize = 500;

/// A posting's id as PostgreSQL can store it: without control characters (a NUL would
/// fail the whole fetch), trimmed, at most [`MAX_ID_CHARS`]; `None` when nothing is left.
fn clean_id(text: &str) -> Option<String> {
    let id: String = text
        .chars()
        .filter(|c| !c.is_control())
        .collect::<String>()
        .trim()
        .chars()
        .take(MAX_ID_CHARS)
        .collect();
    (!id.is_empty()).then_some(id)
}

/// `GET https://api.lever.co/v0/postings/<company>?mode=json`.
fn lever(body: &[u8]) -> Result<BoardPage, ParseError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Posting {
        id: serde_json::Value,
        text: Option<String>,
        hosted_url: Option<String>,
        categories: Option<Categories>,
        created_at: Option<i64>,
    }
    #[derive(Deserialize)]
    struct Categories {
        location: Option<String>,
    }
    let postings: Vec<Posting> =
        serde_json::from_slice(body).map_err(|err| json_error("Lever postings JSON", err))?;
    let mut page = BoardPage::default();
    for posting in postings {
        let listing = (|| {
            Some(BoardListing {
                external_id: id_text(&posting.id)?,
                title: clean(posting.text.as_deref()?),
                company: None,
                location: non_empty(
                    posting
                        .categories
                        .as_ref()
                        .and_then(|c| c.location.as_deref()),
                ),
                url: http_url(posting.hosted_url.as_deref()?, None)?,
                posted_at: posting.created_at.and_then(|millis| {
                    OffsetDateTime::from_unix_timestamp_nanos(i128::from(millis) * 1_000_000).ok()
                }),
            })
        })();
        usable(&mut page, listing);
    }
    Ok(page)
}

/// An RSS 2.0 or Atom feed (RSS 1.0 and JSON Feed are read too).
fn feed(body: &[u8], url: &Url) -> Result<BoardPage, ParseError> {
    let feed = feed_rs::parser::Builder::new()
        .base_uri(Some(url.as_str()))
        .build()
        .parse(body)
        .map_err(|err| ParseError(format!("the answer is not an RSS or Atom feed: {err}")))?;
    let mut page = BoardPage::default();
    for entry in feed.entries {
        let link = entry
            .links
            .iter()
            .find(|link| link.rel.as_deref().is_none_or(|rel| rel == "alternate"))
            .or(entry.links.first())
            .and_then(|link| http_url(&link.href, Some(url)));
        let when = entry.published.or(entry.updated);
        let listing = (|| {
            let url = link?;
            Some(BoardListing {
                external_id: clean_id(&entry.id).unwrap_or_else(|| url.to_string()),
                title: clean(&entry.title.as_ref()?.content),
                company: None,
                location: entry
                    .categories
                    .first()
                    .and_then(|c| non_empty(Some(&c.term))),
                url,
                posted_at: when
                    .and_then(|at| OffsetDateTime::from_unix_timestamp(at.timestamp()).ok()),
            })
        })();
        usable(&mut page, listing);
    }
    Ok(page)
}

/// Query parameters that track where a click came from and say nothing about the
/// posting.
fn is_tracking(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.starts_with("utm_")
        || name.starts_with("lever-")
        || matches!(
            name.as_str(),
            "gh_src" | "ref" | "source" | "src" | "fbclid" | "gclid" | "mc_cid" | "mc_eid"
        )
}

/// The posting's URL without what does not tell postings apart: http and https are
/// one, `www.` is dropped, as are the fragment, tracking parameters, a trailing slash
/// and the order of the remaining parameters.
pub fn canonical_url(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    let host = host.strip_prefix("www.").unwrap_or(&host);
    let port = url
        .port()
        .map(|port| format!(":{port}"))
        .unwrap_or_default();
    let path = url.path().trim_end_matches('/');
    let mut params: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(name, _)| !is_tracking(name))
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect();
    params.sort();
    let mut canonical = format!("https://{host}{port}{path}");
    if !params.is_empty() {
        let query = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params)
            .finish();
        canonical.push('?');
        canonical.push_str(&query);
    }
    canonical
}

#[cfg(test)]
mod tests {
    use super::*;

    const GREENHOUSE: &str = include_str!("../../../tests/fixtures/boards/greenhouse.json");
    const LEVER: &str = include_str!("../../../tests/fixtures/boards/lever.json");
    const RSS: &str = include_str!("../../../tests/fixtures/boards/rss.xml");
    const ATOM: &str = include_str!("../../../tests/fixtures/boards/atom.xml");

    fn board_url() -> Url {
        Url::parse("https://boards.example/feed").unwrap()
    }

    fn at(text: &str) -> Option<OffsetDateTime> {
        Some(OffsetDateTime::parse(text, &Rfc3339).unwrap())
    }

    #[test]
    fn an_id_with_a_nul_is_cleaned_instead_of_failing_the_fetch() {
        let body = r#"{"jobs": [
            {"id": "a\u0000b", "title": "Engineer", "absolute_url": "https://boards.example/1"},
            {"id": "\u0000", "title": "No id left", "absolute_url": "https://boards.example/2"},
            {"id": 7, "title": "Numbered", "absolute_url": "https://boards.example/3"}
        ]}"#;
        let page = parse(SourceKind::Greenhouse, body.as_bytes(), &board_url()).unwrap();
        let ids: Vec<&str> = page
            .listings
            .iter()
            .map(|l| l.external_id.as_str())
            .collect();
        assert_eq!(ids, ["ab", "7"]);
        assert_eq!(page.skipped, 1, "a posting without an id is skipped");
        assert_eq!(clean_id(&"x".repeat(600)).unwrap().len(), MAX_ID_CHARS);
    }

    #[test]
    fn greenhouse_jobs_are_read_with_their_fields() {
        let page = parse(SourceKind::Greenhouse, GREENHOUSE.as_bytes(), &board_url()).unwrap();
        assert_eq!(page.skipped, 0);
        let titles: Vec<&str> = page.listings.iter().map(|l| l.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Backend Engineer (Rust)",
                "Site Reliability Engineer",
                "Product Designer"
            ]
        );
        let first = &page.listings[0];
        assert_eq!(first.external_id, "4001");
        assert_eq!(first.company.as_deref(), Some("Acme Robotics"));
        assert_eq!(first.location.as_deref(), Some("Berlin, Germany"));
        assert_eq!(
            first.url.as_str(),
            "https://boards.greenhouse.io/acme/jobs/4001"
        );
        assert_eq!(first.posted_at, at("2026-11-20T15:00:00Z"));
        assert_eq!(page.listings[2].company, None);
    }

    #[test]
    fn lever_postings_are_read_with_their_fields() {
        let page = parse(SourceKind::Lever, LEVER.as_bytes(), &board_url()).unwrap();
        assert_eq!(page.listings.len(), 2);
        let first = &page.listings[0];
        assert_eq!(first.external_id, "5b1c7a3e-8f4d-4c2a-9e61-0d2b7f3a9c11");
        assert_eq!(first.title, "Data Engineer");
        assert_eq!(first.location.as_deref(), Some("New York, NY"));
        assert_eq!(
            first.url.as_str(),
            "https://jobs.lever.co/globex/5b1c7a3e-8f4d-4c2a-9e61-0d2b7f3a9c11"
        );
        assert_eq!(first.posted_at, at("2026-11-17T12:00:00Z"));
    }

    #[test]
    fn rss_items_are_read_with_their_fields() {
        let page = parse(SourceKind::Rss, RSS.as_bytes(), &board_url()).unwrap();
        assert_eq!(page.listings.len(), 2);
        let first = &page.listings[0];
        assert_eq!(first.external_id, "rustjobs-1187");
        assert_eq!(first.title, "Backend Engineer (Rust) at Acme Robotics");
        assert_eq!(first.location.as_deref(), Some("Berlin"));
        assert_eq!(first.posted_at, at("2026-11-20T16:00:00Z"));
        assert_eq!(
            page.listings[1].url.as_str(),
            "https://initech.example/careers/embedded-rust"
        );
    }

    #[test]
    fn atom_entries_are_read_with_their_fields() {
        let page = parse(SourceKind::Rss, ATOM.as_bytes(), &board_url()).unwrap();
        let ids: Vec<&str> = page
            .listings
            .iter()
            .map(|l| l.external_id.as_str())
            .collect();
        assert_eq!(ids, ["urn:hooli:job:771", "urn:hooli:job:772"]);
        assert_eq!(page.listings[0].title, "Staff Engineer, Search");
        assert_eq!(page.listings[0].posted_at, at("2026-11-24T09:00:00Z"));
        // No <published>: the entry's update time stands in.
        assert_eq!(page.listings[1].posted_at, at("2026-11-21T15:30:00Z"));
    }

    #[test]
    fn answers_of_the_wrong_shape_say_what_was_wrong() {
        let html = b"<html><body>Down for maintenance</body></html>";
        let err = parse(SourceKind::Greenhouse, html, &board_url()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("the answer is not Greenhouse boards JSON:"),
            "{err}"
        );
        let err = parse(SourceKind::Lever, GREENHOUSE.as_bytes(), &board_url()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("the answer is not Lever postings JSON:"),
            "{err}"
        );
        let err = parse(SourceKind::Rss, LEVER.as_bytes(), &board_url()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("the answer is not an RSS or Atom feed"),
            "{err}"
        );
    }

    #[test]
    fn control_characters_are_dropped_and_first_published_wins() {
        let body = "{\"jobs\":[{\"id\": 9, \"title\": \"Eng\\u0000ineer\\t (Rust)\", \"absolute_url\": \"https://a.example/9\", \"updated_at\": \"2026-11-20T10:00:00Z\", \"first_published\": \"2026-10-01T08:00:00Z\"}]}";
        let page = parse(SourceKind::Greenhouse, body.as_bytes(), &board_url()).unwrap();
        assert_eq!(page.listings[0].title, "Engineer (Rust)");
        assert_eq!(page.listings[0].posted_at, at("2026-10-01T08:00:00Z"));
    }

    #[test]
    fn entries_without_a_title_or_a_web_link_are_skipped_and_counted() {
        let body = br#"{"jobs":[
            {"id": 1, "title": "Kept", "absolute_url": "https://a.example/1"},
            {"id": 2, "title": "No link"},
            {"id": 3, "title": "Not the web", "absolute_url": "mailto:jobs@a.example"},
            {"id": 4, "absolute_url": "https://a.example/4"},
            {"id": 1, "title": "Same id again", "absolute_url": "https://a.example/1b"}
        ]}"#;
        let page = parse(SourceKind::Greenhouse, body, &board_url()).unwrap();
        assert_eq!(page.listings.len(), 1);
        assert_eq!(page.listings[0].title, "Kept");
        assert_eq!(page.skipped, 3);
    }

    #[test]
    fn the_canonical_url_ignores_what_does_not_name_the_posting() {
        let canonical = |raw: &str| canonical_url(&Url::parse(raw).unwrap());
        let plain = canonical("https://boards.greenhouse.io/acme/jobs/4001");
        assert_eq!(plain, "https://boards.greenhouse.io/acme/jobs/4001");
        for same in [
            "http://boards.greenhouse.io/acme/jobs/4001/?utm_source=rustjobs&utm_medium=rss",
            "https://www.boards.greenhouse.io/acme/jobs/4001#apply",
            "https://BOARDS.greenhouse.io/acme/jobs/4001?gh_src=abc",
        ] {
            assert_eq!(canonical(same), plain, "{same}");
        }
        // What does name a posting stays, in one order.
        assert_eq!(
            canonical("https://acme.example/careers?gh_jid=7&lang=en"),
            canonical("https://acme.example/careers?lang=en&gh_jid=7&utm_campaign=x")
        );
        assert_ne!(
            canonical("https://acme.example/careers?gh_jid=7"),
            canonical("https://acme.example/careers?gh_jid=8")
        );
        assert_ne!(
            canonical("https://acme.example/jobs/7"),
            canonical("https://acme.example:8443/jobs/7")
        );
    }
}
