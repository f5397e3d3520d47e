//! The calendar objects that go with booking mails (RFC 5545, written by the
//! `icalendar` crate): an invitation (`METHOD:REQUEST`) to the visitor, the same event
//! for the owner's own calendar (`METHOD:PUBLISH`), and a cancellation
//! (`METHOD:CANCEL`, a higher `SEQUENCE`) to both. Every one of them names the booking's
//! one `UID`, so a calendar program replaces or removes the event it already has.

use icalendar::{Calendar, Component, EventStatus, Property};
use jiff::Timestamp;

use crate::domain::mail::CalendarPart;

/// What a calendar object says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// An invitation to the visitor.
    Request,
    /// The owner's copy (they organize it; there is nobody to answer).
    Publish,
    /// The meeting is off.
    Cancel,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Request => "REQUEST",
            Method::Publish => "PUBLISH",
            Method::Cancel => "CANCEL",
        }
    }
}

/// The meeting a calendar object describes.
pub struct Meeting<'a> {
    pub uid: &'a str,
    pub start: Timestamp,
    pub end: Timestamp,
    pub summary: &'a str,
    pub description: &'a str,
    pub organizer: &'a str,
    pub attendee_name: &'a str,
    pub attendee_email: &'a str,
}

/// `20261207T090000Z`: a UTC date-time as RFC 5545 writes it.
fn utc(at: Timestamp) -> String {
    at.strftime("%Y%m%dT%H%M%SZ").to_string()
}

/// A parameter value may not hold a double quote (RFC 5545 §3.2); a name with one gets a
/// single quote instead.
fn parameter(text: &str) -> String {
    text.replace('"', "'")
        .chars()
        .filter(|c| !c.is_control())
        .collect()
}

/// The calendar object for `meeting`, as the part of a mail that carries it.
pub fn calendar(meeting: &Meeting<'_>, method: Method, now: Timestamp) -> CalendarPart {
    let (status, sequence) = match method {
        Method::Cancel => (EventStatus::Cancelled, 1),
        Method::Request | Method::Publish => (EventStatus::Confirmed, 0),
    };
    let mut event = icalendar::Event::with_uid(meeting.uid);
    event
        .add_property("DTSTAMP", utc(now))
        .add_property("DTSTART", utc(meeting.start))
        .add_property("DTEND", utc(meeting.end))
        // Its library escapes `\n` only: a carriage return of an older row would end the
        // line there and let the rest read as a property of its own.
        .summary(&crate::types::normalized_line_breaks(meeting.summary))
        .description(&crate::types::normalized_line_breaks(meeting.description))
        .sequence(sequence)
        .status(status)
        .append_property(Property::new(
            "ORGANIZER",
            format!("mailto:{}", meeting.organizer),
        ))
        .append_property(
            Property::new("ATTENDEE", format!("mailto:{}", meeting.attendee_email))
                .add_parameter("CN", &parameter(meeting.attendee_name))
                .add_parameter("ROLE", "REQ-PARTICIPANT")
                .add_parameter("PARTSTAT", "NEEDS-ACTION")
                .add_parameter(
                    "RSVP",
                    if method == Method::Request {
                        "TRUE"
                    } else {
                        "FALSE"
                    },
                )
                .done(),
        );
    let mut calendar = Calendar::new();
    calendar
        .append_property(Property::new("METHOD", method.as_str()))
        .push(event.done());
    CalendarPart {
        method: method.as_str(),
        ics: calendar.done().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invitation_names_its_method_uid_and_times_in_utc() {
        let meeting = Meeting {
            uid: "booking-7-abc@standmeet.example",
            start: "2026-12-07T09:00:00Z".parse().unwrap(),
            end: "2026-12-07T09:30:00Z".parse().unwrap(),
            summary: "Meeting with Ada",
            description: "Topic: engines, analytical; and \"more\"",
            organizer: "owner@example.com",
            attendee_name: "Ada \"the Countess\" Lovelace",
            attendee_email: "ada@example.com",
        };
        let now = "2026-12-01T12:00:00Z".parse().unwrap();
        let invite = calendar(&meeting, Method::Request, now);
        assert_eq!(invite.method, "REQUEST");
        let text = invite.ics.replace("\r\n ", "");
        assert!(text.contains("METHOD:REQUEST\r\n"), "{text}");
        assert!(
            text.contains("UID:booking-7-abc@standmeet.example\r\n"),
            "{text}"
        );
        assert!(text.contains("DTSTART:20261207T090000Z\r\n"), "{text}");
        assert!(text.contains("DTEND:20261207T093000Z\r\n"), "{text}");
        assert!(
            text.contains("ORGANIZER:mailto:owner@example.com"),
            "{text}"
        );
        assert!(text.contains("CN=Ada 'the Countess' Lovelace"), "{text}");
        let cancel = calendar(&meeting, Method::Cancel, now);
        let text = cancel.ics.replace("\r\n ", "");
        assert!(text.contains("METHOD:CANCEL\r\n"), "{text}");
        assert!(text.contains("STATUS:CANCELLED\r\n"), "{text}");
        assert!(text.contains("SEQUENCE:1\r\n"), "{text}");
        assert!(
            text.contains("UID:booking-7-abc@standmeet.example\r\n"),
            "{text}"
        );
    }

    #[test]
    fn a_carriage_return_in_a_topic_cannot_start_a_property_of_its_own() {
        let meeting = Meeting {
            uid: "booking-8-abc@standmeet.example",
            start: "2026-12-07T09:00:00Z".parse().unwrap(),
            end: "2026-12-07T09:30:00Z".parse().unwrap(),
            summary: "Meeting with Eve\rX-INJECTED:summary",
            description: "Line one\rINJECTED:yes\r\nLine three",
            organizer: "owner@example.com",
            attendee_name: "Eve",
            attendee_email: "eve@example.com",
        };
        let now = "2026-12-01T12:00:00Z".parse().unwrap();
        let text = calendar(&meeting, Method::Request, now).ics;
        // Every carriage return ends a line (CRLF), and no line is the injected one.
        assert!(
            text.match_indices('\r')
                .all(|(at, _)| text[at..].starts_with("\r\n")),
            "a bare CR in {text:?}"
        );
        let unfolded = text.replace("\r\n ", "");
        assert!(
            !unfolded
                .split("\r\n")
                .any(|line| line.starts_with("INJECTED") || line.starts_with("X-INJECTED")),
            "{unfolded:?}"
        );
        assert!(
            unfolded.contains("Line one\\nINJECTED:yes\\nLine three"),
            "{unfolded:?}"
        );
    }
}
