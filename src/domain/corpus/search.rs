//! Searching: what visitors (and agents) find, best first, with marked snippets.

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::text;
use super::{CorpusError, Visibility};

/// The longest query taken, in characters.
pub const MAX_QUERY_CHARS: usize = 200;

/// One search result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hit {
    pub id: i64,
    pub title: String,
    pub visibility: Visibility,
    pub snippet: Vec<text::Piece>,
}

/// At most this many results.
pub const MAX_HITS: i64 = 20;

/// At most this many matches are ranked. Ranking reads every match's document, which
/// for a word in half of 100,000 entries takes most of a second; past this many, the
/// results are the best of the first matches the index gives, not of all of them.
pub const MAX_RANKED: i64 = 500;

/// Searches the promoted entries (restricted ones too when `restricted_allowed`), best
/// first.
pub async fn search(
    pool: &PgPool,
    query: &str,
    restricted_allowed: bool,
) -> Result<Vec<Hit>, CorpusError> {
    let query = query.trim();
    if query.is_empty() {
        return Err(CorpusError::Invalid("Type something to search for.".into()));
    }
    if query.chars().any(char::is_control) {
        return Err(CorpusError::Invalid(
            "A search cannot contain control characters such as tabs or NUL.".into(),
        ));
    }
    let count = query.chars().count();
    if count > MAX_QUERY_CHARS {
        return Err(CorpusError::Invalid(format!(
            "A search is at most {MAX_QUERY_CHARS} characters; this one has {count}."
        )));
    }
    let split = text::split(query);
    let words = Some(split.words.trim().to_string())
        .filter(|words| words.chars().any(char::is_alphanumeric));
    let cjk = cjk_query(&split.cjk);
    if words.is_none() && cjk.is_none() {
        return Ok(Vec::new());
    }
    let rows = sqlx::query!(
        r#"
        WITH parts AS (
            SELECT CASE WHEN $1::text IS NULL THEN NULL ELSE websearch_to_tsquery('english', $1) END AS words,
                   CASE WHEN $2::text IS NULL THEN NULL ELSE $2::tsquery END AS cjk
        ), query AS (
            SELECT CASE WHEN words IS NULL THEN cjk WHEN cjk IS NULL THEN words ELSE words && cjk END AS q
            FROM parts
        ), candidates AS (
            SELECT i.entry_id, i.title, i.body, i.document
            FROM corpus_index i, query
            WHERE i.status = 'promoted'
              AND (i.visibility = 'public' OR $3)
              AND i.document @@ query.q
            LIMIT $5
        ), ranked AS (
            SELECT c.entry_id, c.title, c.body, ts_rank_cd(c.document, query.q) AS rank
            FROM candidates c, query
            ORDER BY rank DESC, c.entry_id DESC
            LIMIT 2 * $4::bigint
        )
        -- Who may see an entry also follows the entry as it is now: one made restricted
        -- is hidden at once, before its index job runs. (Checked on the best few only,
        -- so the common case costs no lookups.)
        SELECT r.entry_id, r.title, r.body, e.visibility AS "visibility: Visibility"
        FROM ranked r
        JOIN corpus_entries e ON e.id = r.entry_id
        WHERE e.status = 'promoted' AND (e.visibility = 'public' OR $3)
        ORDER BY r.rank DESC, r.entry_id DESC
        LIMIT $4
        "#,
        words,
        cjk,
        restricted_allowed,
        MAX_HITS,
        MAX_RANKED
    )
    .fetch_all(pool)
    .await?;
    let marker = text::Marker::new(&text::terms(query));
    Ok(rows
        .into_iter()
        .map(|row| Hit {
            id: row.entry_id,
            title: row.title,
            visibility: row.visibility,
            snippet: text::snippet(&row.body, &marker),
        })
        .collect())
}

/// Every bigram of the query must be in the document.
fn cjk_query(bigrams: &[String]) -> Option<String> {
    // Bigrams hold CJK characters only, so they need no escaping inside quotes.
    let mut unique: Vec<&String> = Vec::new();
    for bigram in bigrams {
        if !unique.contains(&bigram) {
            unique.push(bigram);
        }
    }
    (!unique.is_empty()).then(|| {
        unique
            .iter()
            .map(|bigram| format!("'{bigram}'"))
            .collect::<Vec<_>>()
            .join(" & ")
    })
}
