//! The event types and the events about to be recorded, with the keys of their data
//! (docs/events-and-webhooks.md).

use serde_json::json;

/// What happened: the event types of docs/events-and-webhooks.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    AccessRequestCreated,
    AccessRequestApproved,
    AccessRequestReplied,
    AccessRequestDenied,
    OwnerEmailChanged,
    ListingsFetched,
    CorpusEntryPromoted,
    CorpusEntryUpdated,
    CorpusRebuilt,
    BookingCreated,
    BookingCancelled,
}

impl EventType {
    pub const ALL: [EventType; 11] = [
        EventType::AccessRequestCreated,
        EventType::AccessRequestApproved,
        EventType::AccessRequestReplied,
        EventType::AccessRequestDenied,
        EventType::OwnerEmailChanged,
        EventType::ListingsFetched,
        EventType::CorpusEntryPromoted,
        EventType::CorpusEntryUpdated,
        EventType::CorpusRebuilt,
        EventType::BookingCreated,
        EventType::BookingCancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::AccessRequestCreated => "access_request.created",
            EventType::AccessRequestApproved => "access_request.approved",
            EventType::AccessRequestReplied => "access_request.replied",
            EventType::AccessRequestDenied => "access_request.denied",
            EventType::OwnerEmailChanged => "owner.email_changed",
            EventType::ListingsFetched => "listings.fetched",
            EventType::CorpusEntryPromoted => "corpus.entry_promoted",
            EventType::CorpusEntryUpdated => "corpus.entry_updated",
            EventType::CorpusRebuilt => "corpus.rebuilt",
            EventType::BookingCreated => "booking.created",
            EventType::BookingCancelled => "booking.cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

/// An event about to be recorded: its type, the id it is about (the first id in its
/// data) and its data.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    pub event_type: EventType,
    pub subject_id: Option<i64>,
    pub data: serde_json::Value,
}

impl NewEvent {
    /// `access_request.created|approved|replied|denied`: `{request_id, email}`.
    pub fn access_request(event_type: EventType, request_id: i64, email: &str) -> NewEvent {
        NewEvent {
            event_type,
            subject_id: Some(request_id),
            data: json!({ "request_id": request_id, "email": email }),
        }
    }

    /// `owner.email_changed`, on confirmation: `{change_id, email}`.
    pub fn owner_email_changed(change_id: i64, email: &str) -> NewEvent {
        NewEvent {
            event_type: EventType::OwnerEmailChanged,
            subject_id: Some(change_id),
            data: json!({ "change_id": change_id, "email": email }),
        }
    }

    /// `listings.fetched`, one per finished fetch job: `{source_id, job_id, new_listing_ids}`.
    pub fn listings_fetched(source_id: i64, job_id: i64, new_listing_ids: &[i64]) -> NewEvent {
        NewEvent {
            event_type: EventType::ListingsFetched,
            subject_id: Some(source_id),
            data: json!({
                "source_id": source_id,
                "job_id": job_id,
                "new_listing_ids": new_listing_ids,
            }),
        }
    }

    /// `corpus.entry_promoted|updated`: `{entry_id, version}`.
    pub fn corpus_entry(event_type: EventType, entry_id: i64, version: i64) -> NewEvent {
        NewEvent {
            event_type,
            subject_id: Some(entry_id),
            data: json!({ "entry_id": entry_id, "version": version }),
        }
    }
}

impl NewEvent {
    /// `corpus.rebuilt`, by a vault rebuild that changed anything: `{job_id, added,
    /// updated, removed}`. The post-build hooks are the endpoints subscribed to it.
    pub fn corpus_rebuilt(job_id: i64, added: u64, updated: u64, removed: u64) -> NewEvent {
        NewEvent {
            event_type: EventType::CorpusRebuilt,
            subject_id: Some(job_id),
            data: json!({ "job_id": job_id, "added": added, "updated": updated, "removed": removed }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_reads_back_from_its_name() {
        for event_type in EventType::ALL {
            assert_eq!(EventType::parse(event_type.as_str()), Some(event_type));
        }
        assert_eq!(EventType::parse("access_request.exploded"), None);
    }
}
