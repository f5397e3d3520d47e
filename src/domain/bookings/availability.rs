//! When the owner is free: weekly windows read in the owner's time zone
//! (`STANDMEET_TIMEZONE`), cut into slots, minus what is booked (with the buffer) and
//! minus the past. Pure arithmetic over `jiff`'s time zone database, so that the rules of
//! daylight saving time are jiff's, not ours: a 09:00 window stays 09:00 local across a
//! change, and a window over the change is as long as the clock says it is.

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// One weekly window, as the owner and the tools write it: `{weekday: 1-7 (Monday 1),
/// start: "HH:MM", end: "HH:MM"}`. `end` may be "24:00" (until midnight).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Window {
    /// 1 (Monday) to 7 (Sunday).
    pub weekday: i8,
    /// "HH:MM", in the owner's time zone.
    pub start: String,
    /// "HH:MM" after start ("24:00" for midnight).
    pub end: String,
}

/// The owner's availability.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Availability {
    pub windows: Vec<Window>,
    pub slot_minutes: i32,
    pub buffer_minutes: i32,
    pub days_ahead: i32,
}

/// The bounds the settings must keep (the same as the table's checks).
pub const SLOT_MINUTES: std::ops::RangeInclusive<i32> = 5..=480;
pub const BUFFER_MINUTES: std::ops::RangeInclusive<i32> = 0..=240;
pub const DAYS_AHEAD: std::ops::RangeInclusive<i32> = 1..=365;
/// The most windows a week may have.
pub const MAX_WINDOWS: usize = 70;

pub const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// A window as minutes of its day.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Minutes {
    weekday: i8,
    start: i32,
    end: i32,
}

/// "HH:MM" as minutes since midnight; "24:00" only where `end` allows it.
fn parse_clock(text: &str, end: bool) -> Option<i32> {
    let (hours, minutes) = text.trim().split_once(':')?;
    if hours.is_empty() || hours.len() > 2 || minutes.len() != 2 {
        return None;
    }
    let hours: i32 = hours.parse().ok()?;
    let minutes: i32 = minutes.parse().ok()?;
    match (hours, minutes) {
        (0..=23, 0..=59) => Some(hours * 60 + minutes),
        (24, 0) if end => Some(24 * 60),
        _ => None,
    }
}

/// Minutes since midnight as "HH:MM".
pub fn clock(minutes: i32) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

impl Availability {
    /// Checks everything at once and answers every problem in words for the owner, or
    /// the availability with its windows written the same way ("9:00" becomes "09:00")
    /// and in order.
    pub fn checked(
        windows: Vec<Window>,
        slot_minutes: i32,
        buffer_minutes: i32,
        days_ahead: i32,
    ) -> Result<Availability, Vec<String>> {
        let mut problems = Vec::new();
        if !SLOT_MINUTES.contains(&slot_minutes) {
            problems.push(format!(
                "A slot must be {} to {} minutes long; it was {slot_minutes}.",
                SLOT_MINUTES.start(),
                SLOT_MINUTES.end()
            ));
        }
        if !BUFFER_MINUTES.contains(&buffer_minutes) {
            problems.push(format!(
                "The buffer must be {} to {} minutes; it was {buffer_minutes}.",
                BUFFER_MINUTES.start(),
                BUFFER_MINUTES.end()
            ));
        }
        if !DAYS_AHEAD.contains(&days_ahead) {
            problems.push(format!(
                "Days ahead must be {} to {}; it was {days_ahead}.",
                DAYS_AHEAD.start(),
                DAYS_AHEAD.end()
            ));
        }
        if windows.len() > MAX_WINDOWS {
            problems.push(format!(
                "At most {MAX_WINDOWS} windows (ten a day); there were {}.",
                windows.len()
            ));
            return Err(problems);
        }
        let mut parsed = Vec::new();
        for window in &windows {
            let Some(day) = usize::try_from(i32::from(window.weekday) - 1)
                .ok()
                .and_then(|index| WEEKDAYS.get(index))
            else {
                problems.push(format!(
                    "A weekday is a number from 1 (Monday) to 7 (Sunday); it was {}.",
                    window.weekday
                ));
                continue;
            };
            let (Some(start), Some(end)) = (
                parse_clock(&window.start, false),
                parse_clock(&window.end, true),
            ) else {
                let shown = |text: &str| text.trim().chars().take(20).collect::<String>();
                problems.push(format!(
                    "{day} {}–{}: write times as HH:MM, such as 09:00 or 17:30.",
                    shown(&window.start),
                    shown(&window.end)
                ));
                continue;
            };
            if end <= start {
                problems.push(format!(
                    "{day} {}–{}: the end must come after the start.",
                    clock(start),
                    clock(end)
                ));
                continue;
            }
            if SLOT_MINUTES.contains(&slot_minutes) && end - start < slot_minutes {
                problems.push(format!(
                    "{day} {}–{} is shorter than one slot ({slot_minutes} minutes).",
                    clock(start),
                    clock(end)
                ));
                continue;
            }
            parsed.push(Minutes {
                weekday: window.weekday,
                start,
                end,
            });
        }
        parsed.sort_by_key(|w| (w.weekday, w.start));
        for pair in parsed.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.weekday == b.weekday && b.start < a.end {
                problems.push(format!(
                    "{}: {}–{} and {}–{} overlap.",
                    WEEKDAYS[(a.weekday - 1) as usize],
                    clock(a.start),
                    clock(a.end),
                    clock(b.start),
                    clock(b.end)
                ));
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Availability {
            windows: parsed
                .into_iter()
                .map(|w| Window {
                    weekday: w.weekday,
                    start: clock(w.start),
                    end: clock(w.end),
                })
                .collect(),
            slot_minutes,
            buffer_minutes,
            days_ahead,
        })
    }

    fn minutes(&self) -> Vec<Minutes> {
        self.windows
            .iter()
            .filter_map(|w| {
                Some(Minutes {
                    weekday: w.weekday,
                    start: parse_clock(&w.start, false)?,
                    end: parse_clock(&w.end, true)?,
                })
            })
            .collect()
    }

    pub fn slot_length(&self) -> SignedDuration {
        SignedDuration::from_mins(i64::from(self.slot_minutes))
    }

    pub fn buffer(&self) -> SignedDuration {
        SignedDuration::from_mins(i64::from(self.buffer_minutes))
    }

    /// Every slot of the windows that starts in `[from, until)`, in order, booked or not.
    pub fn grid(&self, tz: &TimeZone, from: Timestamp, until: Timestamp) -> Vec<Slot> {
        let windows = self.minutes();
        let length = self.slot_length();
        let mut slots = Vec::new();
        // A window of the day before may still run after `from` (one that ends at
        // midnight local, seen from a zone further east).
        let Ok(mut day) = from.to_zoned_datetime(tz.clone()).date().yesterday() else {
            return slots;
        };
        let last = until.to_zoned_datetime(tz.clone()).date();
        while day <= last {
            let weekday = day.weekday().to_monday_one_offset();
            for window in windows.iter().filter(|w| w.weekday == weekday) {
                let (Some(open), Some(close)) =
                    (local(tz, day, window.start), local(tz, day, window.end))
                else {
                    continue;
                };
                let mut start = open;
                while let Ok(end) = start.checked_add(length) {
                    if end > close {
                        break;
                    }
                    if start >= from && start < until {
                        slots.push(Slot { start, end });
                    }
                    start = end;
                }
            }
            match day.tomorrow() {
                Ok(next) => day = next,
                Err(_) => break,
            }
        }
        slots
    }

    /// The first moment past the bookable days: midnight (local) `days_ahead` days after
    /// today's, so "14 days ahead" is today and the next 13 days.
    pub fn horizon(&self, tz: &TimeZone, now: Timestamp) -> Timestamp {
        let today = now.to_zoned_datetime(tz.clone()).date();
        today
            .checked_add(jiff::Span::new().days(i64::from(self.days_ahead)))
            .ok()
            .and_then(|day| local(tz, day, 0))
            .unwrap_or(Timestamp::MAX)
    }

    /// The free slots starting in `[from, until)`: on the grid, after `now`, before the
    /// horizon, and clear (with the buffer on both sides) of every busy range in `busy`
    /// (confirmed bookings as `(start, blocked_until)`).
    pub fn free_slots(
        &self,
        tz: &TimeZone,
        now: Timestamp,
        from: Timestamp,
        until: Timestamp,
        busy: &[(Timestamp, Timestamp)],
    ) -> Vec<Slot> {
        let horizon = self.horizon(tz, now);
        let buffer = self.buffer();
        self.grid(tz, from.max(now), until.min(horizon))
            .into_iter()
            .filter(|slot| slot.start > now)
            .filter(|slot| {
                let blocked_until = slot.end.checked_add(buffer).unwrap_or(Timestamp::MAX);
                !busy.iter().any(|(busy_start, busy_until)| {
                    slot.start < *busy_until && *busy_start < blocked_until
                })
            })
            .collect()
    }
}

/// `minutes` after midnight of `day` in `tz` (1440: the next midnight). A time the clock
/// skips (spring forward) is read as jiff's "compatible" choice, the same as most
/// calendar programs: the moment after the gap.
fn local(tz: &TimeZone, day: Date, minutes: i32) -> Option<Timestamp> {
    let (day, minutes) = if minutes >= 24 * 60 {
        (day.tomorrow().ok()?, minutes - 24 * 60)
    } else {
        (day, minutes)
    };
    let at: DateTime = day.at((minutes / 60) as i8, (minutes % 60) as i8, 0, 0);
    at.to_zoned_datetime(tz.clone())
        .ok()
        .map(|zoned| zoned.timestamp())
}

/// One bookable time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub start: Timestamp,
    pub end: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_day(start: &str, end: &str) -> Vec<Window> {
        (1..=7)
            .map(|weekday| Window {
                weekday,
                start: start.into(),
                end: end.into(),
            })
            .collect()
    }

    fn availability(windows: Vec<Window>, slot: i32, buffer: i32) -> Availability {
        Availability::checked(windows, slot, buffer, 60).expect("a valid availability")
    }

    fn at(text: &str) -> Timestamp {
        text.parse().expect("an RFC 3339 time")
    }

    fn starts(slots: &[Slot]) -> Vec<String> {
        slots.iter().map(|slot| slot.start.to_string()).collect()
    }

    #[test]
    fn a_nine_oclock_window_stays_nine_local_across_spring_and_autumn_in_berlin() {
        let tz = TimeZone::get("Europe/Berlin").unwrap();
        let owner = availability(every_day("09:00", "09:30"), 30, 0);
        // Summer time starts on Sunday 29 March 2026 and ends on Sunday 25 October 2026.
        let spring = owner.grid(&tz, at("2026-03-28T00:00:00Z"), at("2026-03-30T00:00:00Z"));
        assert_eq!(
            starts(&spring),
            ["2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z"],
            "09:00 CET is 08:00 UTC, 09:00 CEST is 07:00 UTC"
        );
        let autumn = owner.grid(&tz, at("2026-10-24T00:00:00Z"), at("2026-10-26T00:00:00Z"));
        assert_eq!(
            starts(&autumn),
            ["2026-10-24T07:00:00Z", "2026-10-25T08:00:00Z"]
        );
    }

    #[test]
    fn windows_over_the_change_are_as_long_as_the_clock_says_in_new_york() {
        let tz = TimeZone::get("America/New_York").unwrap();
        // 01:00–04:00 local: on 8 March 2026 the clock jumps from 02:00 to 03:00 (two
        // hours of time, four slots); on 1 November 2026 it goes back from 02:00 to
        // 01:00 (four hours, eight slots, 01:00–02:00 lived twice).
        let owner = availability(every_day("01:00", "04:00"), 30, 0);
        let spring = owner.grid(&tz, at("2026-03-08T00:00:00Z"), at("2026-03-08T12:00:00Z"));
        assert_eq!(
            starts(&spring),
            [
                "2026-03-08T06:00:00Z",
                "2026-03-08T06:30:00Z",
                "2026-03-08T07:00:00Z",
                "2026-03-08T07:30:00Z"
            ]
        );
        let autumn = owner.grid(&tz, at("2026-11-01T00:00:00Z"), at("2026-11-01T12:00:00Z"));
        assert_eq!(autumn.len(), 8);
        assert_eq!(autumn[0].start, at("2026-11-01T05:00:00Z"), "01:00 EDT");
        assert_eq!(autumn[7].end, at("2026-11-01T09:00:00Z"), "04:00 EST");
        // The week after, a 09:00–09:30 window is at 14:00 UTC (EST), before it 13:00 (EDT).
        let nine = availability(every_day("09:00", "09:30"), 30, 0);
        let around = nine.grid(&tz, at("2026-10-31T00:00:00Z"), at("2026-11-02T00:00:00Z"));
        assert_eq!(
            starts(&around),
            ["2026-10-31T13:00:00Z", "2026-11-01T14:00:00Z"]
        );
    }

    #[test]
    fn booked_time_and_its_buffer_are_not_free_nor_the_past_nor_past_the_horizon() {
        let tz = TimeZone::UTC;
        let owner = Availability::checked(every_day("09:00", "12:00"), 30, 15, 2).unwrap();
        let now = at("2026-12-07T09:40:00Z");
        // Booked 10:30–11:00, blocked until 11:15 (its buffer).
        let busy = [(at("2026-12-07T10:30:00Z"), at("2026-12-07T11:15:00Z"))];
        let free = owner.free_slots(&tz, now, now, at("2026-12-08T00:00:00Z"), &busy);
        // 09:00 and 09:30 are past; 10:00 would end at 10:30 + 15 buffer; 10:30 and
        // 11:00 are taken; 11:30 starts after the blocked time.
        assert_eq!(starts(&free), ["2026-12-07T11:30:00Z"]);
        let later = owner.free_slots(&tz, now, now, at("2026-12-31T00:00:00Z"), &busy);
        assert_eq!(
            later.last().map(|slot| slot.start),
            Some(at("2026-12-08T11:30:00Z")),
            "two days ahead: today and tomorrow"
        );
    }

    #[test]
    fn bad_windows_are_refused_with_every_problem_named() {
        let windows = vec![
            Window {
                weekday: 2,
                start: "17:00".into(),
                end: "09:00".into(),
            },
            Window {
                weekday: 1,
                start: "09:00".into(),
                end: "12:00".into(),
            },
            Window {
                weekday: 1,
                start: "11:00".into(),
                end: "13:00".into(),
            },
            Window {
                weekday: 8,
                start: "09:00".into(),
                end: "10:00".into(),
            },
            Window {
                weekday: 3,
                start: "nine".into(),
                end: "10:00".into(),
            },
        ];
        let problems = Availability::checked(windows, 0, 0, 14).unwrap_err();
        let text = problems.join("\n");
        assert!(
            text.contains("A slot must be 5 to 480 minutes long"),
            "{text}"
        );
        assert!(
            text.contains("Tuesday 17:00–09:00: the end must come after the start."),
            "{text}"
        );
        assert!(
            text.contains("Monday: 09:00–12:00 and 11:00–13:00 overlap."),
            "{text}"
        );
        assert!(
            text.contains("from 1 (Monday) to 7 (Sunday); it was 8"),
            "{text}"
        );
        assert!(
            text.contains("Wednesday nine–10:00: write times as HH:MM"),
            "{text}"
        );
        let ok = Availability::checked(
            vec![Window {
                weekday: 5,
                start: "9:00".into(),
                end: "24:00".into(),
            }],
            30,
            0,
            14,
        )
        .unwrap();
        assert_eq!(ok.windows[0].start, "09:00");
        assert_eq!(ok.windows[0].end, "24:00");
    }
}
