//! `jobs.fetch_source`: fetches one board over HTTP and upserts its listings.
//!
//! The HTTP side has limits a board cannot talk us out of: a connect and a total
//! timeout, at most 5 redirects, and at most [`MAX_BODY_BYTES`] of answer. What went
//! wrong decides what happens next: a timeout, a refused connection, 408, 429 or a 5xx
//! is worth another try (the job retries with backoff); any other 4xx, a body too large
//! or one that is not what the source's kind promises will not get better by waiting,
//! so the job is discarded with a message that says what was wrong.
//!
//! The upsert and the job's completion commit in one transaction: a fetch that was
//! cancelled meanwhile writes nothing, and `first_seen_job_id` (which makes a listing
//! `new` in its fetch's answer) always names a completed job.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use url::Url;

use super::SourceKind;
use super::boards::{self, BoardListing};
use crate::config::Settings;
use crate::domain::events::{self, NewEvent};
use crate::domain::outbound;
use standmeet_jobs::{JobContext, JobError, JobKind};

/// The largest answer a board may give.
pub const MAX_BODY_BYTES: usize = 5 * 1024 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const TOTAL_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FetchArgs {
    pub source_id: i64,
}

/// What one fetch found; the job's output.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FetchOutput {
    pub source_id: i64,
    /// Postings in the board's answer that became or matched a listing.
    pub fetched: usize,
    /// Of those, the ones no fetch had seen before.
    pub new: usize,
    /// Entries without a title or a web link.
    pub skipped: usize,
    pub listing_ids: Vec<i64>,
}

/// The source a fetch is for.
struct FetchedSource {
    id: i64,
    name: String,
    kind: SourceKind,
    url: String,
}

/// The `jobs.fetch_source` handler, with its HTTP client.
pub struct FetchSource {
    client: reqwest::Client,
    /// `STANDMEET_FETCH_ALLOW_PRIVATE` (see [`outbound`]).
    allow_private: bool,
}

impl FetchSource {
    pub fn new(settings: &Settings) -> anyhow::Result<FetchSource> {
        let agent = format!(
            "StandMeet/{} (+{})",
            env!("CARGO_PKG_VERSION"),
            settings.public_url
        );
        let allow_private = settings.fetch_allow_private;
        Ok(FetchSource {
            client: http_client(&agent, allow_private)?,
            allow_private,
        })
    }

    /// GETs `url`, answering its body, or what to do about the failure.
    async fn download(&self, url: &Url, kind: SourceKind) -> Result<Vec<u8>, JobError> {
        let accept = match kind {
            SourceKind::Greenhouse | SourceKind::Lever => "application/json",
            SourceKind::Rss => {
                "application/rss+xml, application/atom+xml, application/xml;q=0.9, text/xml;q=0.8"
            }
        };
        if let Some(refused) = outbound::refusal(url, self.allow_private) {
            return Err(JobError::discard(refused));
        }
        let mut response = crate::telemetry::otel::with_trace_headers(self.client.get(url.clone()))
            .header(reqwest::header::ACCEPT, accept)
            .send()
            .await
            .map_err(transport_error)?;
        let status = response.status();
        if !status.is_success() {
            let words = format!(
                "the board answered {} {}",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            );
            let words = words.trim_end().to_string();
            return Err(
                if status.is_server_error()
                    || status == reqwest::StatusCode::TOO_MANY_REQUESTS
                    || status == reqwest::StatusCode::REQUEST_TIMEOUT
                {
                    JobError::retry(words)
                } else {
                    JobError::discard(format!("{words}; check the source's URL"))
                },
            );
        }
        if response
            .content_length()
            .is_some_and(|length| length > MAX_BODY_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// The client every fetch uses: names resolve through the guard's resolver, at most 5
/// redirects, none to an address the guard refuses (names are checked by the resolver,
/// an address written in the new URL here), and the time limits.
fn http_client(agent: &str, allow_private: bool) -> reqwest::Result<reqwest::Client> {
    let redirects = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= 5 {
            attempt.error("too many redirects")
        } else if let Some(refused) = outbound::refusal(attempt.url(), allow_private) {
            attempt.error(refused)
        } else {
            attempt.follow()
        }
    });
    outbound::client_builder(allow_private)
        .user_agent(agent)
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(TOTAL_TIMEOUT)
        .redirect(redirects)
        .build()
}

fn too_large() -> JobError {
    JobError::discard(format!(
        "the board's answer is larger than {} MiB",
        MAX_BODY_BYTES / (1024 * 1024)
    ))
}

/// A failure before or while the answer came: worth another try.
fn transport_error(err: reqwest::Error) -> JobError {
    if let Some(refused) = outbound::guard_refusal(&err) {
        JobError::discard(refused)
    } else if err.is_timeout() {
        JobError::retry(format!(
            "the board did not answer within {} s",
            TOTAL_TIMEOUT.as_secs()
        ))
    } else if err.is_connect() {
        JobError::retry("cannot connect to the board".to_string())
    } else if err.is_redirect() {
        let why = std::error::Error::source(&err)
            .map(ToString::to_string)
            .unwrap_or_else(|| "too many redirects".into());
        JobError::discard(format!("the board's redirect was not followed: {why}"))
    } else {
        JobError::retry(format!("the board's answer broke off: {err}"))
    }
}

impl JobKind for FetchSource {
    const KIND: &'static str = "jobs.fetch_source";
    const QUEUE: &'static str = "fetch";
    /// Boards that fail for a while are tried again on the next "Fetch new"; three
    /// attempts ride out a blip without keeping a waiting admin for minutes.
    const MAX_ATTEMPTS: i16 = 3;
    const TIMEOUT: Duration = Duration::from_secs(60);
    type Args = FetchArgs;
    type Output = FetchOutput;

    async fn run(&self, job: JobContext, args: FetchArgs) -> Result<FetchOutput, JobError> {
        let source = sqlx::query_as!(
            FetchedSource,
            r#"SELECT id, name, kind AS "kind: SourceKind", url FROM listing_sources WHERE id = $1"#,
            args.source_id
        )
        .fetch_optional(job.pool())
        .await?
        .ok_or_else(|| JobError::discard(format!("source {} was removed", args.source_id)))?;
        let url = Url::parse(&source.url)
            .map_err(|err| JobError::discard(format!("the source's URL is not valid: {err}")))?;
        // The GET, a span of the attempt's trace (when exporting), whose request
        // carries the trace's context to the board.
        let span = crate::trace_span!(
            "board.fetch",
            otel.name = "board fetch",
            otel.kind = "client",
            board.kind = ?source.kind,
        );
        let body = tracing::Instrument::instrument(self.download(&url, source.kind), span).await?;
        let page = boards::parse(source.kind, &body, &url)
            .map_err(|err| JobError::discard(err.to_string()))?;

        let mut tx = job.pool().begin().await?;
        let mut output = FetchOutput {
            source_id: args.source_id,
            skipped: page.skipped,
            ..Default::default()
        };
        // In canonical-URL order, so that two fetches that meet on a posting lock it in
        // the same order and never deadlock.
        let mut listings = page.listings;
        listings.sort_by_cached_key(|listing| boards::canonical_url(&listing.url));
        let mut new_listing_ids = Vec::new();
        for listing in &listings {
            let (id, new) = upsert(&mut tx, &source, listing, job.id.0).await?;
            output.fetched += 1;
            output.new += usize::from(new);
            output.listing_ids.push(id);
            if new {
                new_listing_ids.push(id);
            }
        }
        let fetched = NewEvent::listings_fetched(args.source_id, job.id.0, &new_listing_ids);
        events::record(&mut tx, &fetched).await?;
        job.complete_tx(&mut tx, &output).await?;
        tx.commit().await?;
        tracing::info!(
            source.id = args.source_id,
            fetched = output.fetched,
            new = output.new,
            skipped = output.skipped,
            "a board was fetched"
        );
        Ok(output)
    }
}

/// Writes one posting: the listing it already is on this board (by its id there), or
/// the listing with its canonical URL (seen on another board), or a new listing. When
/// several boards list a posting, the listing shows the words of the best-ranked one
/// ([`SourceKind::rank`], then the older source), whichever fetch came first. Answers
/// the listing's id and whether it is new.
async fn upsert(
    tx: &mut PgConnection,
    source: &FetchedSource,
    posting: &BoardListing,
    job_id: i64,
) -> Result<(i64, bool), sqlx::Error> {
    let company = posting
        .company
        .clone()
        .unwrap_or_else(|| source.name.clone());
    let known = sqlx::query_scalar!(
        "SELECT listing_id FROM listing_sightings WHERE source_id = $1 AND external_id = $2",
        source.id,
        posting.external_id
    )
    .fetch_optional(&mut *tx)
    .await?;
    let (listing_id, inserted) = match known {
        Some(listing_id) => (listing_id, false),
        None => {
            let row = sqlx::query!(
                r#"
                INSERT INTO listings (source_id, source_rank, external_id, title, company,
                                      location, url, canonical_url, posted_at, first_seen_job_id)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                ON CONFLICT (canonical_url) DO UPDATE SET last_seen_at = now()
                RETURNING id, (xmax = 0) AS "inserted!"
                "#,
                source.id,
                source.kind.rank(),
                posting.external_id,
                posting.title,
                company,
                posting.location,
                posting.url.as_str(),
                boards::canonical_url(&posting.url),
                posting.posted_at,
                job_id
            )
            .fetch_one(&mut *tx)
            .await?;
            (row.id, row.inserted)
        }
    };
    sqlx::query!(
        r#"
        INSERT INTO listing_sightings (source_id, external_id, listing_id) VALUES ($1, $2, $3)
        ON CONFLICT (source_id, external_id) DO UPDATE SET last_seen_at = now()
        "#,
        source.id,
        posting.external_id,
        listing_id
    )
    .execute(&mut *tx)
    .await?;
    if !inserted {
        // This board's newest words, when it is the listing's source or outranks it.
        sqlx::query!(
            r#"
            UPDATE listings
            SET last_seen_at = now(), source_id = $2, source_rank = $3, external_id = $4,
                title = $5, company = $6, location = $7, url = $8,
                posted_at = coalesce($9, posted_at)
            WHERE id = $1 AND (source_rank, source_id) >= ($3, $2)
            "#,
            listing_id,
            source.id,
            source.kind.rank(),
            posting.external_id,
            posting.title,
            company,
            posting.location,
            posting.url.as_str(),
            posting.posted_at
        )
        .execute(&mut *tx)
        .await?;
    }
    Ok((listing_id, inserted))
}

#[cfg(test)]
mod tests {
    //! The guard at fetch time, with `STANDMEET_FETCH_ALLOW_PRIVATE` off. A board on
    //! loopback is refused before any request, so the redirects are watched by sending
    //! the fetch's own client (its resolver and redirect policy) to a board fixture on
    //! loopback by address, which the client itself does not refuse (only the fetch's
    //! check before the request does, shown first).

    use super::*;
    use axum::Router;
    use axum::response::Redirect;
    use axum::routing::get;
    use standmeet_jobs::ErrorAction;

    /// A board on loopback that sends every `/to?url=…` to `url`, and has a feed.
    async fn board() -> String {
        let app = Router::new()
            .route("/feed", get(|| async { "<rss/>" }))
            .route(
                "/to",
                get(
                    |axum::extract::Query(to): axum::extract::Query<
                        std::collections::HashMap<String, String>,
                    >| async move { Redirect::temporary(&to["url"]) },
                ),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{address}")
    }

    fn redirect_to(board: &str, target: &str) -> Url {
        let mut url = Url::parse(&format!("{board}/to")).unwrap();
        url.query_pairs_mut().append_pair("url", target);
        url
    }

    #[tokio::test]
    async fn a_board_on_loopback_is_refused_before_any_request() {
        let board = board().await;
        let fetch = FetchSource {
            client: http_client("test", false).unwrap(),
            allow_private: false,
        };
        let url = Url::parse(&format!("{board}/feed")).unwrap();
        let refused = fetch.download(&url, SourceKind::Rss).await.unwrap_err();
        assert!(
            matches!(refused.action, ErrorAction::Discard),
            "{refused:?}"
        );
        assert!(
            refused.message.contains("STANDMEET_FETCH_ALLOW_PRIVATE"),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn a_redirect_to_a_private_address_is_not_followed() {
        let board = board().await;
        let port = Url::parse(&board).unwrap().port().unwrap();
        let client = http_client("test", false).unwrap();
        for target in [
            "http://10.0.0.1/feed".to_string(),
            "http://10.255.1.2:8080/feed".to_string(),
            "http://169.254.169.254/latest/meta-data".to_string(),
            format!("http://127.0.0.1:{port}/feed"),
            format!("http://localhost:{port}/feed"),
            "http://[::1]/feed".to_string(),
        ] {
            let err = client
                .get(redirect_to(&board, &target))
                .send()
                .await
                .expect_err(&target);
            let refused = transport_error(err);
            assert!(
                matches!(refused.action, ErrorAction::Discard),
                "{target}: {refused:?}"
            );
            assert!(
                refused
                    .message
                    .starts_with("the board's redirect was not followed")
                    && refused.message.contains("STANDMEET_FETCH_ALLOW_PRIVATE"),
                "{target}: {refused:?}"
            );
        }
    }

    #[tokio::test]
    async fn with_private_addresses_allowed_the_redirect_is_followed() {
        let board = board().await;
        let client = http_client("test", true).unwrap();
        let answer = client
            .get(redirect_to(&board, &format!("{board}/feed")))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), reqwest::StatusCode::OK);
        assert_eq!(answer.text().await.unwrap(), "<rss/>");
    }
}
