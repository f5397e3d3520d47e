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
    // Not a checked `query!`: this one must run as an unnamed statement (`persistent
    // (false)`), which PostgreSQL plans anew with the query's own words. A prepared
    // statement soon gets a generic plan that guesses how common the words are, and
    // for a word in most entries it then builds a bitmap of every match (tens of
    // milliseconds at 100,000 entries) where a plain scan stops at the first
    // `MAX_RANKED`. The query is covered by the search tests instead.
    let rows: Vec<(i64, String, String, Visibility)> = sqlx::query_as(
        r#"
        WITH candidates AS (
            SELECT i.entry_id, i.title, i.body, i.document
            FROM corpus_index i
            WHERE i.status = 'promoted'
              AND (i.visibility = 'public' OR $3)
              AND i.document @@ (CASE WHEN $1::text IS NULL THEN $2::tsquery
                                      WHEN $2::tsquery IS NULL THEN websearch_to_tsquery('english', $1)
                                      ELSE websearch_to_tsquery('english', $1) && $2::tsquery END)
            LIMIT $5
        ), ranked AS (
            SELECT c.entry_id, c.title, c.body,
                   ts_rank_cd(c.document,
                              CASE WHEN $1::text IS NULL THEN $2::tsquery
                                   WHEN $2::tsquery IS NULL THEN websearch_to_tsquery('english', $1)
                                   ELSE websearch_to_tsquery('english', $1) && $2::tsquery END) AS rank
            FROM candidates c
            ORDER BY rank DESC, c.entry_id DESC
            LIMIT 2 * $4::bigint
        )
        -- Who may see an entry also follows the entry as it is now: one made restricted
        -- is hidden at once, before its index job runs. (Checked on the best few only,
        -- so the common case costs no lookups.)
        SELECT r.entry_id, r.title, r.body, e.visibility
        FROM ranked r
        JOIN corpus_entries e ON e.id = r.entry_id
        WHERE e.status = 'promoted' AND (e.visibility = 'public' OR $3)
        ORDER BY r.rank DESC, r.entry_id DESC
        LIMIT $4
        "#,
    )
    .bind(words)
    .bind(cjk)
    .bind(restricted_allowed)
    .bind(MAX_HITS)
    .bind(MAX_RANKED)
    .persistent(false)
    .fetch_all(pool)
    .await?;
    let marker = text::Marker::new(&text::terms(query));
    Ok(rows
        .into_iter()
        .map(|(id, title, body, visibility)| Hit {
            id,
            title,
            visibility,
            snippet: text::snippet(&super::markdown::plain_text(&body), &marker),
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

/// An entry as a visitor reads it at `/entries/<id>`: its promoted, indexed version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedEntry {
    pub id: i64,
    pub title: String,
    pub body: String,
    pub visibility: Visibility,
    /// The tags of the vault note it is made from.
    pub tags: Vec<String>,
}

/// Entry `id` as search shows it, under the same rules: promoted, and restricted only
/// when `restricted_allowed` (as the entry is now, and as it was indexed). `None` when
/// the visitor may not see it, or it does not exist: a visitor cannot tell the two apart.
pub async fn published_entry(
    pool: &PgPool,
    id: i64,
    restricted_allowed: bool,
) -> Result<Option<PublishedEntry>, sqlx::Error> {
    sqlx::query_as!(
        PublishedEntry,
        r#"
        SELECT i.entry_id AS id, i.title, i.body, e.visibility AS "visibility: Visibility",
               COALESCE(n.tags, '{}') AS "tags!"
        FROM corpus_index i
        JOIN corpus_entries e ON e.id = i.entry_id
        LEFT JOIN corpus_vault_notes n ON n.entry_id = i.entry_id
        WHERE i.entry_id = $1
          AND i.status = 'promoted' AND e.status = 'promoted'
          AND ((i.visibility = 'public' AND e.visibility = 'public') OR $2)
        "#,
        id,
        restricted_allowed,
    )
    .fetch_optional(pool)
    .await
}

/// Who reads an entry's body, which decides where its `[[wikilinks]]` may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// A visitor: links to published entries, restricted ones only when allowed, at
    /// `/entries/<id>`.
    Visitor { restricted_allowed: bool },
    /// An admin: links to every entry, at `/admin/corpus/<id>`.
    Admin,
}

/// The entries that wikilink names (`$1`, lowercased) go to for a reader (`$2`: an
/// admin, who sees every entry; `$3`: a visitor who may see restricted ones): a vault
/// note's name, path or alias first, then an entry's title, each name once.
///
/// Each way a name can match is a branch of its own, so that each is an index lookup
/// (`name`, `lower(path)`, the GIN index on `aliases`, `lower(title)`): one `OR` over
/// them would read the whole notes table for every name on every page view. Kept as
/// text so that a test can `EXPLAIN` this very statement (`tests/it/corpus.rs`).
pub const WIKILINK_TARGETS_SQL: &str = r#"
    SELECT DISTINCT ON (n.name) n.name, e.id
    FROM unnest($1::text[]) AS n (name)
    JOIN LATERAL (
        SELECT v.entry_id AS id, 1 AS rank FROM corpus_vault_notes v WHERE v.name = n.name
        UNION ALL
        SELECT v.entry_id, 1 FROM corpus_vault_notes v WHERE lower(v.path) = n.name || '.md'
        UNION ALL
        SELECT v.entry_id, 1 FROM corpus_vault_notes v WHERE v.aliases @> ARRAY[n.name]
        UNION ALL
        SELECT t.id, 2 FROM corpus_entries t WHERE lower(t.title) = n.name
    ) AS matched ON true
    JOIN corpus_entries e ON e.id = matched.id
    LEFT JOIN corpus_index i ON i.entry_id = e.id
    WHERE $2 OR (i.status = 'promoted' AND e.status = 'promoted'
                 AND ((i.visibility = 'public' AND e.visibility = 'public') OR $3))
    ORDER BY n.name, matched.rank, e.id
"#;

/// Entry body `markdown` as sanitized HTML for `reader`: a wikilink goes to the entry
/// of the vault's note it names (by file name, path or alias), else to the entry with
/// that title (any case), when the reader may see it; it is its text otherwise.
pub async fn body_html(
    pool: &PgPool,
    markdown: &str,
    reader: Reader,
) -> Result<String, sqlx::Error> {
    let names = super::markdown::wikilink_targets(markdown);
    let targets: Vec<(String, i64)> = if names.is_empty() {
        Vec::new()
    } else {
        let (admin, restricted_allowed) = match reader {
            Reader::Admin => (true, true),
            Reader::Visitor { restricted_allowed } => (false, restricted_allowed),
        };
        sqlx::query_as::<_, (String, i64)>(WIKILINK_TARGETS_SQL)
            .bind(&names)
            .bind(admin)
            .bind(restricted_allowed)
            .fetch_all(pool)
            .await?
    };
    let prefix = match reader {
        Reader::Admin => "/admin/corpus",
        Reader::Visitor { .. } => "/entries",
    };
    Ok(super::markdown::to_html(markdown, |note| {
        let note = note.to_lowercase();
        targets
            .iter()
            .find(|(name, _)| *name == note)
            .map(|(_, id)| format!("{prefix}/{id}"))
    }))
}
