//! Types the server and the browser share: what a job is called and which state it is
//! in (from the job engine, `standmeet_jobs`, which lends them to the browser), what a
//! mail chip says, listings and receipts as the pages and the JSON endpoints speak of them.

use serde::{Deserialize, Serialize};

pub use standmeet_jobs::{JobId, JobState};

/// What the chip of a mail says, from the state of the job that sends it
/// (docs/reference/answers.md): not finished yet → `sending`; completed → `sent`; a failed
/// attempt waiting for its retry, or given up → `failed`. A failed mail that is retried goes
/// `failed` → `sending` → `sent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum MailState {
    Sending,
    Sent,
    Failed,
}

impl MailState {
    pub fn of_job(state: JobState) -> MailState {
        match state {
            JobState::Available | JobState::Scheduled | JobState::Running => MailState::Sending,
            JobState::Completed => MailState::Sent,
            JobState::Retryable | JobState::Discarded | JobState::Cancelled => MailState::Failed,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MailState::Sending => "sending",
            MailState::Sent => "sent",
            MailState::Failed => "failed",
        }
    }
}

/// What a visitor is told once their session holds access (by the code they entered,
/// now or before): the operation answers it, and `/access` shows it.
pub const ACCESS_GRANTED: &str = "Access granted. You can now search the restricted entries too.";

/// Where an access request stands (the `access_request_status` enum): `pending` until an
/// admin or an agent decides; `approved` once its code is issued and the mail queued;
/// `replied` once that mail went out (the mail job sets it); `denied`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "ssr",
    derive(sqlx::Type),
    sqlx(type_name = "access_request_status", rename_all = "lowercase")
)]
#[serde(rename_all = "lowercase")]
pub enum RequestStatus {
    Pending,
    Approved,
    Replied,
    Denied,
}

impl RequestStatus {
    pub const ALL: [RequestStatus; 4] = [
        RequestStatus::Pending,
        RequestStatus::Approved,
        RequestStatus::Replied,
        RequestStatus::Denied,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RequestStatus::Pending => "pending",
            RequestStatus::Approved => "approved",
            RequestStatus::Replied => "replied",
            RequestStatus::Denied => "denied",
        }
    }

    pub fn parse(text: &str) -> Option<RequestStatus> {
        RequestStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

/// A booking's state (the `booking_state` enum): `confirmed` when booked, `cancelled`
/// by the visitor's link, an admin or an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "ssr",
    derive(sqlx::Type),
    sqlx(type_name = "booking_state", rename_all = "lowercase")
)]
#[serde(rename_all = "lowercase")]
pub enum BookingState {
    Confirmed,
    Cancelled,
}

impl BookingState {
    pub fn as_str(self) -> &'static str {
        match self {
            BookingState::Confirmed => "confirmed",
            BookingState::Cancelled => "cancelled",
        }
    }
}

/// What a listing source's chip says of its newest fetch, from that fetch job's state:
/// `never` fetched, `fetching` (waiting or running), `fetched`, `retrying` after a
/// failed try, `failed` (given up) or `cancelled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FetchState {
    Never,
    Fetching,
    Fetched,
    Retrying,
    Failed,
    Cancelled,
}

impl FetchState {
    pub fn of_job(state: Option<JobState>) -> FetchState {
        match state {
            None => FetchState::Never,
            Some(JobState::Available | JobState::Scheduled | JobState::Running) => {
                FetchState::Fetching
            }
            Some(JobState::Completed) => FetchState::Fetched,
            Some(JobState::Retryable) => FetchState::Retrying,
            Some(JobState::Discarded) => FetchState::Failed,
            Some(JobState::Cancelled) => FetchState::Cancelled,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FetchState::Never => "never",
            FetchState::Fetching => "fetching",
            FetchState::Fetched => "fetched",
            FetchState::Retrying => "retrying",
            FetchState::Failed => "failed",
            FetchState::Cancelled => "cancelled",
        }
    }

    /// Still on its way: the page follows its job live.
    pub fn is_moving(self) -> bool {
        matches!(self, FetchState::Fetching | FetchState::Retrying)
    }
}

/// A job listing, as `jobs.fetch_new`, `jobs.fetch_result` and the listings page give
/// it. Times are RFC 3339 in UTC.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
pub struct Listing {
    pub id: i64,
    /// The source whose words it shows (the employer's own board before a feed that
    /// relists it), and the posting's id there.
    pub source_id: i64,
    pub external_id: String,
    pub title: String,
    pub company: Option<String>,
    pub location: Option<String>,
    pub url: String,
    pub posted_at: Option<String>,
    pub first_seen_at: String,
    /// First seen by the fetch this answer is about.
    pub new: bool,
}

/// A source whose fetch did not succeed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
pub struct FetchFailure {
    pub job_id: i64,
    pub source_id: Option<i64>,
    pub source: Option<String>,
    /// `discarded` (the board's answer could not be used, or out of attempts) or
    /// `cancelled`.
    pub state: JobState,
    pub error: String,
}

/// The answer of "fetch new listings": `{job_ids, pending:true}` while a fetch runs,
/// else `{job_ids, pending:false, listings, errors}`. `jobs.fetch_result` answers in the
/// same shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
pub struct FetchAnswer {
    pub job_ids: Vec<JobId>,
    pub pending: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listings: Option<Vec<Listing>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<FetchFailure>>,
}

impl FetchAnswer {
    /// How many listings this fetch saw first.
    pub fn new_count(&self) -> usize {
        self.listings
            .as_ref()
            .map_or(0, |listings| listings.iter().filter(|l| l.new).count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_job_state_maps_to_the_mail_chip_of_product_md() {
        let expected = [
            (JobState::Available, "sending"),
            (JobState::Scheduled, "sending"),
            (JobState::Running, "sending"),
            (JobState::Completed, "sent"),
            (JobState::Retryable, "failed"),
            (JobState::Discarded, "failed"),
            (JobState::Cancelled, "failed"),
        ];
        assert_eq!(expected.len(), JobState::ALL.len());
        for (state, chip) in expected {
            assert_eq!(MailState::of_job(state).as_str(), chip, "{state}");
        }
    }

    #[test]
    fn job_states_round_trip_through_their_words() {
        for state in JobState::ALL {
            assert_eq!(JobState::parse(state.as_str()), Some(state));
            assert_eq!(
                serde_json::to_string(&state).unwrap(),
                format!("\"{state}\"")
            );
        }
        assert_eq!(JobState::parse("Completed"), None);
    }
}

/// A corpus write's receipt, as `corpus.create` / `update` / `promote` answer it: the
/// entry, whether the index holds this write already, and the index job to ask about
/// when not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
pub struct WriteReceipt {
    pub id: i64,
    pub indexed: bool,
    pub index_job_id: JobId,
}

impl WriteReceipt {
    /// What to tell the admin.
    pub fn message(&self, verb: &str) -> String {
        if self.indexed {
            format!(
                "Entry {} {verb} and indexed: searches find it now.",
                self.id
            )
        } else {
            format!(
                "Entry {} {verb}; indexing queued (job {}): searches find it once it is done.",
                self.id, self.index_job_id
            )
        }
    }
}
