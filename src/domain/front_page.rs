//! The visitors' front page: the owner's name and a short introduction in Markdown,
//! set by an admin (`/admin/account`) and rendered here, on the server, to HTML that
//! can carry nothing but text, emphasis, lists, quotes, code and links.

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

/// The longest owner name the front page takes, in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// The longest introduction, in characters: a short one, not an essay.
pub const MAX_INTRODUCTION_CHARS: usize = 4_000;

/// What the front page says of the owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontPage {
    pub owner_name: String,
    /// Markdown, as written.
    pub introduction: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrontPageError {
    #[error("Give the name visitors should see (up to {MAX_NAME_CHARS} characters).")]
    Name,
    #[error(
        "The introduction is {0} characters long; the front page takes up to {MAX_INTRODUCTION_CHARS}."
    )]
    IntroductionTooLong(usize),
    #[error("The {0} holds control characters; write it as plain text.")]
    ControlCharacters(&'static str),
}

/// What the owner set, if anything.
pub async fn get(pool: &PgPool) -> Result<Option<FrontPage>, sqlx::Error> {
    sqlx::query_as!(
        FrontPage,
        "SELECT owner_name, introduction FROM front_page WHERE id = 1"
    )
    .fetch_optional(pool)
    .await
}

/// Checks a name and an introduction as a person typed them (trimmed) and answers
/// them, or why not.
pub fn checked(owner_name: &str, introduction: &str) -> Result<FrontPage, FrontPageError> {
    let owner_name = owner_name.trim();
    if owner_name.is_empty() || owner_name.chars().count() > MAX_NAME_CHARS {
        return Err(FrontPageError::Name);
    }
    if owner_name.chars().any(char::is_control) {
        return Err(FrontPageError::ControlCharacters("name"));
    }
    let introduction = introduction.trim();
    let length = introduction.chars().count();
    if length > MAX_INTRODUCTION_CHARS {
        return Err(FrontPageError::IntroductionTooLong(length));
    }
    // Lines and tabs are the Markdown's own; no other control character has a place.
    if introduction
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(FrontPageError::ControlCharacters("introduction"));
    }
    Ok(FrontPage {
        owner_name: owner_name.to_string(),
        introduction: introduction.to_string(),
    })
}

/// Stores what the front page says (checked by [`checked`]).
pub async fn save(pool: &PgPool, page: &FrontPage) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"
        INSERT INTO front_page (id, owner_name, introduction) VALUES (1, $1, $2)
        ON CONFLICT (id) DO UPDATE
        SET owner_name = excluded.owner_name, introduction = excluded.introduction,
            updated_at = now()
        "#,
        page.owner_name,
        page.introduction,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// The introduction as HTML. Raw HTML in the Markdown shows as the text it is; images
/// show their description (the page loads nothing from elsewhere); a link whose
/// address is not `http`, `https`, `mailto` or on this site shows as its text; headings
/// sit one level below the page's own (the owner's name is its only `h1`).
pub fn introduction_html(markdown: &str) -> String {
    let mut in_dropped_link = false;
    let events = Parser::new_ext(markdown, Options::ENABLE_STRIKETHROUGH).filter_map(|event| {
        Some(match event {
            Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
            Event::Start(Tag::Image { .. }) | Event::End(TagEnd::Image) => return None,
            Event::Start(Tag::Link { ref dest_url, .. }) if !safe_address(dest_url) => {
                in_dropped_link = true;
                return None;
            }
            Event::End(TagEnd::Link) if in_dropped_link => {
                in_dropped_link = false;
                return None;
            }
            Event::Start(Tag::Heading {
                level,
                id,
                classes,
                attrs,
            }) => Event::Start(Tag::Heading {
                level: one_below(level),
                id,
                classes,
                attrs,
            }),
            Event::End(TagEnd::Heading(level)) => Event::End(TagEnd::Heading(one_below(level))),
            other => other,
        })
    });
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

fn one_below(level: HeadingLevel) -> HeadingLevel {
    match level {
        HeadingLevel::H1 => HeadingLevel::H2,
        HeadingLevel::H2 => HeadingLevel::H3,
        HeadingLevel::H3 => HeadingLevel::H4,
        HeadingLevel::H4 => HeadingLevel::H5,
        _ => HeadingLevel::H6,
    }
}

/// An address a link may go to: `http`, `https`, `mailto`, or one with no scheme (a
/// path on this site, a fragment).
fn safe_address(address: &str) -> bool {
    let address = address.trim();
    if address.starts_with("//") {
        return false;
    }
    match address.find(':') {
        None => true,
        Some(colon) => {
            // A colon after a path, query or fragment began is not a scheme's.
            if address[..colon].contains(['/', '?', '#']) {
                return true;
            }
            let scheme = address[..colon].to_ascii_lowercase();
            matches!(scheme.as_str(), "http" | "https" | "mailto")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_html_and_raw_html_stays_text() {
        let html = introduction_html("# Hi\n\nI *build* things. <script>alert(1)</script>");
        assert!(html.contains("<h2>Hi</h2>"), "{html}");
        assert!(html.contains("<em>build</em>"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(!html.contains("<script"), "{html}");
    }

    #[test]
    fn only_safe_links_stay_links_and_images_are_their_description() {
        let html = introduction_html(
            "[site](https://example.com) [mail](mailto:a@b.example) [here](/search?q=x) \
             [bad](javascript:alert(1)) [odd](//evil.example) ![a cat](https://img.example/cat.png)",
        );
        assert!(
            html.contains("<a href=\"https://example.com\">site</a>"),
            "{html}"
        );
        assert!(
            html.contains("<a href=\"mailto:a@b.example\">mail</a>"),
            "{html}"
        );
        assert!(html.contains("<a href=\"/search?q=x\">here</a>"), "{html}");
        assert!(!html.contains("javascript"), "{html}");
        assert!(!html.contains("evil.example"), "{html}");
        assert!(html.contains("bad"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("a cat"), "{html}");
    }

    #[test]
    fn names_and_introductions_are_checked() {
        assert_eq!(checked("  ", ""), Err(FrontPageError::Name));
        assert_eq!(
            checked(&"n".repeat(MAX_NAME_CHARS + 1), ""),
            Err(FrontPageError::Name)
        );
        assert_eq!(
            checked("Ada", &"x".repeat(MAX_INTRODUCTION_CHARS + 1)),
            Err(FrontPageError::IntroductionTooLong(
                MAX_INTRODUCTION_CHARS + 1
            ))
        );
        assert_eq!(
            checked("Ada\0", ""),
            Err(FrontPageError::ControlCharacters("name"))
        );
        assert_eq!(
            checked("Ada", "Hi\u{1b}[31m"),
            Err(FrontPageError::ControlCharacters("introduction"))
        );
        assert!(checked("Ada", "Line one\r\n\tLine two").is_ok());
        let page = checked(" Ada Lovelace ", " Hello. ").unwrap();
        assert_eq!(page.owner_name, "Ada Lovelace");
        assert_eq!(page.introduction, "Hello.");
    }
}
