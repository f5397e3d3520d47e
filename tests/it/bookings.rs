//! Bookings end to end on a real database, over real HTTP and a real SMTP peer: the race
//! for one slot, the invitation and its cancellation (read back with an independent
//! iCalendar parser), the cancel link, a confirmation that comes too late, who may book,
//! and bad input. The daylight-saving arithmetic is tested beside it, in
//! `src/domain/bookings/availability.rs`.

use crate::common;

use std::net::{IpAddr, Ipv4Addr};

use axum::http::StatusCode;
use common::app::start_app_engine;
use common::jobs::wait_for_state;
use common::mcp::{TOKEN, structured};
use common::{OWNER, TestApp};
use serde_json::{Value, json};
use sqlx::PgPool;
use standmeet_jobs::{JobId, JobState};

/// Every day of the week, all day, so a test finds free slots whenever it runs.
async fn open_all_week(app: &TestApp) {
    let windows: Vec<Value> = (1..=7)
        .map(|weekday| json!({ "weekday": weekday, "start": "00:00", "end": "24:00" }))
        .collect();
    let result = app
        .call_tool(
            "bookings.availability",
            json!({ "windows": windows, "slot_minutes": 30, "buffer_minutes": 0, "days_ahead": 3 }),
        )
        .await;
    assert_ne!(result["isError"], json!(true), "{result}");
}

/// The free slots' starts, as the tool gives them.
async fn free_starts(app: &TestApp) -> Vec<String> {
    let result = app.call_tool("bookings.slots", json!({})).await;
    let slots = structured(&result);
    slots["slots"]
        .as_array()
        .expect("a list of slots")
        .iter()
        .map(|slot| slot["start"].as_str().unwrap().to_string())
        .collect()
}

/// A visitor's booking form as the page posts it.
fn booking_form<'a>(start: &'a str, name: &'a str, email: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("start", start),
        ("name", name),
        ("email", email),
        ("topic", "A chat about engines"),
    ]
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    common::count(pool, sql).await
}

#[sqlx::test(migrations = false)]
async fn fifty_visitors_racing_for_one_slot_leave_one_booking_and_forty_nine_409s(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MAIL", "log")
        .setting("STANDMEET_BOOKING", "open")
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .spawn()
        .await;
    open_all_week(&app).await;
    let start = free_starts(&app)
        .await
        .into_iter()
        .next()
        .expect("a free slot");

    // Fifty visitors, each from an address of its own (all of 127.0.0.0/8 is loopback),
    // over real HTTP, at once.
    let url = app.url("/api/book");
    let attempts = (0..50u8).map(|n| {
        let url = url.clone();
        let start = start.clone();
        async move {
            let client = reqwest::Client::builder()
                .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 1, n + 1)))
                .build()
                .unwrap();
            let email = format!("visitor{n}@example.com");
            let reply = client
                .post(url)
                .header("sec-fetch-site", "same-origin")
                .header("accept", "application/json")
                .form(&booking_form(&start, &format!("Visitor {n}"), &email))
                .send()
                .await
                .expect("an answer");
            let status = reply.status();
            (status, reply.text().await.unwrap())
        }
    });
    let answers = futures_util::future::join_all(attempts).await;
    let won: Vec<_> = answers
        .iter()
        .filter(|(status, _)| status.is_success())
        .collect();
    let lost: Vec<_> = answers
        .iter()
        .filter(|(status, _)| *status == reqwest::StatusCode::CONFLICT)
        .collect();
    assert_eq!(won.len(), 1, "{answers:?}");
    assert_eq!(lost.len(), 49, "{answers:?}");
    for (_, body) in &lost {
        assert!(body.contains("That time was just taken"), "{body}");
    }
    // Nothing written for the 49: one booking, its two mail jobs, one event.
    assert_eq!(count(&pool, "SELECT count(*) FROM bookings").await, 1);
    assert_eq!(count(&pool, "SELECT count(*) FROM jobs").await, 2);
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM events WHERE type = 'booking.created'"
        )
        .await,
        1
    );
    assert!(
        !free_starts(&app).await.contains(&start),
        "the slot is taken"
    );
}

/// The body of the MIME part whose content type starts with `content_type`, with its
/// transfer encoding undone.
fn mime_part(mail: &str, content_type: &str) -> Option<String> {
    let mail = mail.replace("\r\n", "\n");
    let at = mail.to_ascii_lowercase().find(&format!(
        "content-type: {}",
        content_type.to_ascii_lowercase()
    ))?;
    let part = &mail[at..];
    let (headers, rest) = part.split_once("\n\n")?;
    let body = rest.split("\n--").next().unwrap_or(rest);
    let headers = headers.to_ascii_lowercase();
    if headers.contains("content-transfer-encoding: base64") {
        use base64::Engine;
        let compact: String = body.split_whitespace().collect();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(compact)
            .ok()?;
        return String::from_utf8(bytes).ok();
    }
    if headers.contains("content-transfer-encoding: quoted-printable") {
        let bytes = quoted_printable::decode(
            body.replace('\n', "\r\n"),
            quoted_printable::ParseMode::Robust,
        )
        .ok()?;
        return String::from_utf8(bytes).ok();
    }
    Some(body.to_string())
}

/// A calendar object read by the `ical` crate (not the library that wrote it): its
/// METHOD, and its one event's UID, DTSTART and STATUS.
struct ParsedCalendar {
    method: String,
    uid: String,
    start: String,
    status: String,
}

fn parse_calendar(ics: &str) -> ParsedCalendar {
    let mut parser = ical::IcalParser::new(std::io::BufReader::new(ics.as_bytes()));
    let calendar = parser
        .next()
        .expect("one calendar")
        .expect("an iCalendar object that parses");
    let property = |properties: &[ical::property::Property], name: &str| {
        properties
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.value.clone())
            .unwrap_or_else(|| panic!("{name} in {ics}"))
    };
    assert_eq!(calendar.events.len(), 1, "{ics}");
    let event = &calendar.events[0];
    ParsedCalendar {
        method: property(&calendar.properties, "METHOD"),
        uid: property(&event.properties, "UID"),
        start: property(&event.properties, "DTSTART"),
        status: property(&event.properties, "STATUS"),
    }
}

/// `2026-12-07T09:00:00Z` as iCalendar writes it: `20261207T090000Z`.
fn ics_time(rfc3339: &str) -> String {
    rfc3339.replace(['-', ':'], "")
}

#[sqlx::test(migrations = false)]
async fn a_booking_mails_an_invitation_and_its_link_cancels_it_with_the_same_uid(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .smtp()
        .jobs()
        .setting("STANDMEET_BOOKING", "open")
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .spawn()
        .await;
    let smtp = app.smtp();
    open_all_week(&app).await;
    let start = free_starts(&app)
        .await
        .into_iter()
        .nth(2)
        .expect("a free slot");

    let reply = app
        .post_form(
            "/api/book",
            &booking_form(&start, "Ada Lovelace", "ada@example.com"),
            None,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let booked = reply.json();
    assert_eq!(booked["start"], start.as_str());
    let id = booked["id"].as_i64().unwrap();
    let (notify, confirmation): (i64, i64) =
        sqlx::query_as("SELECT notify_job_id, confirmation_job_id FROM bookings WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    wait_for_state(&pool, JobId(notify), JobState::Completed).await;
    wait_for_state(&pool, JobId(confirmation), JobState::Completed).await;

    // The owner was told, with the event for their own calendar.
    let owner_mails = smtp.mails_to(OWNER);
    assert_eq!(owner_mails.len(), 1);
    assert!(
        owner_mails[0]
            .text()
            .contains("Ada Lovelace <ada@example.com> booked a meeting")
    );
    let published = parse_calendar(&mime_part(&owner_mails[0].data, "text/calendar").unwrap());
    assert_eq!(published.method, "PUBLISH");

    // The visitor's invitation: an iMIP REQUEST for the booked time.
    let invitations = smtp.mails_to("ada@example.com");
    assert_eq!(invitations.len(), 1);
    let raw = &invitations[0].data;
    assert!(
        raw.to_ascii_lowercase()
            .contains("content-type: text/calendar; method=request"),
        "{raw}"
    );
    let invite = parse_calendar(&mime_part(raw, "text/calendar").expect("a calendar part"));
    assert_eq!(invite.method, "REQUEST");
    assert_eq!(invite.status, "CONFIRMED");
    assert_eq!(invite.start, ics_time(&start));
    assert_eq!(invite.uid, published.uid, "one event for both sides");
    let text = mime_part(raw, "text/plain").expect("a text part");
    let link = text
        .split_whitespace()
        .find(|word| word.contains("/book/cancel?token="))
        .expect("a cancel link in the mail")
        .to_string();
    let token = link.split("token=").nth(1).unwrap().to_string();

    // The link opens a page that cancels nothing by itself.
    let shown = app
        .get(&format!("/api/book/cancel_view?token={token}"))
        .await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.body);
    assert_eq!(shown.json()["state"], "confirmed");
    // The visitor's shape: the time and the state, nothing of the owner's side (the
    // notification's job, a mail server's reply, which may name the owner's address).
    let mut fields: Vec<String> = shown.json().as_object().unwrap().keys().cloned().collect();
    fields.sort();
    assert_eq!(fields, ["owner_when", "start", "state"], "{}", shown.body);
    let page = app.get(&format!("/book/cancel?token={token}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Cancel booking"), "{}", page.body);
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM bookings WHERE state = 'confirmed'"
        )
        .await,
        1
    );

    // Its button cancels, once.
    let cancelled = app
        .post_form("/api/book/cancel", &[("token", &token)], None)
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    let again = app
        .post_form("/api/book/cancel", &[("token", &token)], None)
        .await;
    assert_eq!(again.status, StatusCode::GONE, "{}", again.body);
    assert!(again.body.contains("cancelled already"), "{}", again.body);
    let unknown = app
        .post_form("/api/book/cancel", &[("token", "no-such-token")], None)
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);

    // One cancellation job mails both sides a CANCEL for the same UID.
    let job: i64 = sqlx::query_scalar("SELECT cancellation_job_id FROM bookings WHERE id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    wait_for_state(&pool, JobId(job), JobState::Completed).await;
    for who in ["ada@example.com", OWNER] {
        let mails = smtp.mails_to(who);
        assert_eq!(mails.len(), 2, "{who}: the first mail and the cancellation");
        let cancel = parse_calendar(&mime_part(&mails[1].data, "text/calendar").unwrap());
        assert_eq!(cancel.method, "CANCEL", "{who}");
        assert_eq!(cancel.status, "CANCELLED", "{who}");
        assert_eq!(cancel.uid, invite.uid, "{who}: the same event");
    }
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM events WHERE type = 'booking.cancelled'"
        )
        .await,
        1
    );
    // The time is free again.
    assert!(free_starts(&app).await.contains(&start));
}

#[sqlx::test(migrations = false)]
async fn a_confirmation_whose_booking_was_cancelled_before_it_ran_sends_nothing(pool: PgPool) {
    crate::common::schema(&pool).await;
    // No engine yet: the booking and its cancellation happen before any mail job runs.
    let app = TestApp::desk(&pool)
        .smtp()
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .spawn()
        .await;
    open_all_week(&app).await;
    let start = free_starts(&app).await.into_iter().next().unwrap();
    let created = app
        .call_tool(
            "bookings.create",
            json!({ "start": start, "name": "Grace", "email": "grace@example.com", "topic": "Compilers" }),
        )
        .await;
    let booking = structured(&created);
    assert_eq!(booking["state"], "confirmed");
    let id = booking["id"].as_i64().unwrap();
    let confirmation = JobId(booking["confirmation_job_id"].as_i64().unwrap());
    let notify = JobId(booking["notify_job_id"].as_i64().unwrap());
    let cancelled = structured(&app.call_tool("bookings.cancel", json!({ "id": id })).await);
    assert_eq!(cancelled["state"], "cancelled");
    let twice = app.call_tool("bookings.cancel", json!({ "id": id })).await;
    assert_eq!(twice["isError"], json!(true), "{twice}");

    let _engine = start_app_engine(&pool, &app.state).await;
    let done = wait_for_state(&pool, confirmation, JobState::Completed).await;
    assert_eq!(
        done.output,
        Some(json!({ "sent": false, "reason": "stale" }))
    );
    let told = wait_for_state(&pool, notify, JobState::Completed).await;
    assert_eq!(
        told.output,
        Some(json!({ "sent": false, "reason": "stale" }))
    );
    let job: i64 = sqlx::query_scalar("SELECT cancellation_job_id FROM bookings WHERE id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    wait_for_state(&pool, JobId(job), JobState::Completed).await;
    // Each side got the cancellation only.
    let smtp = app.smtp();
    for who in ["grace@example.com", OWNER] {
        let mails = smtp.mails_to(who);
        assert_eq!(mails.len(), 1, "{who}");
        let cancel = parse_calendar(&mime_part(&mails[0].data, "text/calendar").unwrap());
        assert_eq!(cancel.method, "CANCEL");
    }
}

#[sqlx::test(migrations = false)]
async fn who_may_book_follows_the_setting(pool: PgPool) {
    crate::common::schema(&pool).await;
    // access (the default): a visitor needs a redeemed code; the owner's agent does not.
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MAIL", "log")
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .spawn()
        .await;
    open_all_week(&app).await;
    let start = free_starts(&app).await.into_iter().next().unwrap();
    let page = app.get("/api/book/page").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.json()["refusal"]
            .as_str()
            .unwrap()
            .contains("access code")
    );
    assert_eq!(page.json()["slots"], json!([]));
    let refused = app
        .post_form(
            "/api/book",
            &booking_form(&start, "Eve", "eve@example.com"),
            None,
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(
        refused.body.contains("needs an access code"),
        "{}",
        refused.body
    );
    assert_eq!(count(&pool, "SELECT count(*) FROM bookings").await, 0);
    let by_agent = app
        .call_tool(
            "bookings.create",
            json!({ "start": start, "name": "Eve", "email": "eve@example.com", "topic": "" }),
        )
        .await;
    assert_ne!(by_agent["isError"], json!(true), "{by_agent}");

    // A visitor who redeemed a code may book (their session says so).
    let request: i64 = sqlx::query_scalar(
        "INSERT INTO access_requests (name, email, status, code_hash, replied_at) \
         VALUES ('Ada', 'ada@example.com', 'replied', $1, now()) RETURNING id",
    )
    .bind(standmeet::domain::secrets::code_hash("K7QF-2MZP-9HXA"))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(request > 0);
    let redeemed = app
        .post_form(
            "/api/redeem_access",
            &[("email", "ada@example.com"), ("code", "K7QF-2MZP-9HXA")],
            None,
        )
        .await;
    assert_eq!(redeemed.status, StatusCode::OK, "{}", redeemed.body);
    let session = redeemed.session_cookie().expect("a session");
    let page = app.get_with_cookie("/api/book/page", &session).await;
    assert_eq!(page.json()["refusal"], Value::Null, "{}", page.body);
    assert_eq!(page.json()["email"], "ada@example.com");
    let second = &free_starts(&app).await[0];
    let booked = app
        .post_form(
            "/api/book",
            &booking_form(second, "Ada", "ada@example.com"),
            Some(&session),
        )
        .await;
    assert_eq!(booked.status, StatusCode::OK, "{}", booked.body);

    // off: the page says closed, no slots, and the tools refuse.
    let closed = TestApp::desk(&pool)
        .setting("STANDMEET_MAIL", "log")
        .setting("STANDMEET_BOOKING", "off")
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .spawn()
        .await;
    let page = closed.get("/api/book/page").await;
    assert_eq!(page.json()["refusal"], "Bookings are closed.");
    assert_eq!(page.json()["slots"], json!([]));
    let html = closed.get("/book").await;
    assert!(html.body.contains("Bookings are closed."), "{}", html.body);
    for (tool, arguments) in [
        ("bookings.slots", json!({})),
        ("bookings.list", json!({})),
        ("bookings.availability", json!({})),
        ("bookings.cancel", json!({ "id": 1 })),
        (
            "bookings.create",
            json!({ "start": second, "name": "Eve", "email": "eve@example.com", "topic": "" }),
        ),
    ] {
        let result = closed.call_tool(tool, arguments).await;
        assert_eq!(result["isError"], json!(true), "{tool}: {result}");
        assert!(
            result.to_string().contains("Bookings are closed"),
            "{result}"
        );
    }
    assert_eq!(count(&pool, "SELECT count(*) FROM bookings").await, 2);
}

#[sqlx::test(migrations = false)]
async fn bad_availability_and_bad_bookings_are_refused_in_words_and_change_nothing(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MAIL", "log")
        .setting("STANDMEET_BOOKING", "open")
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .spawn()
        .await;
    let before = structured(&app.call_tool("bookings.availability", json!({})).await);
    assert_eq!(before["slot_minutes"], 30);
    assert_eq!(before["buffer_minutes"], 0);
    assert_eq!(before["days_ahead"], 14);
    assert_eq!(before["timezone"], "UTC");
    assert_eq!(
        before["windows"].as_array().unwrap().len(),
        5,
        "weekdays 9 to 5"
    );

    for (arguments, words) in [
        (
            json!({ "windows": [{ "weekday": 1, "start": "17:00", "end": "09:00" }] }),
            "the end must come after the start",
        ),
        (
            json!({ "windows": [
                { "weekday": 2, "start": "09:00", "end": "12:00" },
                { "weekday": 2, "start": "11:30", "end": "13:00" }
            ] }),
            "overlap",
        ),
        (
            json!({ "slot_minutes": 0 }),
            "A slot must be 5 to 480 minutes long",
        ),
        (json!({ "days_ahead": 0 }), "Days ahead must be 1 to 365"),
    ] {
        let result = app
            .call_tool("bookings.availability", arguments.clone())
            .await;
        assert_eq!(result["isError"], json!(true), "{arguments}: {result}");
        assert!(result.to_string().contains(words), "{arguments}: {result}");
    }
    let after = structured(&app.call_tool("bookings.availability", json!({})).await);
    assert_eq!(after, before, "nothing changed");

    // The admin form: the same checks, a 400 in words.
    let cookie = app.sign_in_admin().await;
    let form = [
        ("monday", "09:00–12:00, 11:00–13:00"),
        ("tuesday", "whenever"),
        ("wednesday", ""),
        ("thursday", ""),
        ("friday", ""),
        ("saturday", ""),
        ("sunday", ""),
        ("slot_minutes", "30"),
        ("buffer_minutes", "ten"),
        ("days_ahead", "14"),
    ];
    let reply = app
        .post_form("/api/bookings/availability", &form, Some(&cookie))
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    assert!(
        reply.body.contains("Tuesday: write each window as"),
        "{}",
        reply.body
    );
    assert!(
        reply.body.contains("The buffer must be a whole number"),
        "{}",
        reply.body
    );
    let anonymous = app
        .post_form("/api/bookings/availability", &form, None)
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let after = structured(&app.call_tool("bookings.availability", json!({})).await);
    assert_eq!(after, before, "nothing changed");

    // Bookings: a time that is not a slot, in the past, not a time at all, a bad
    // address, a NUL in the name: 400 each, nothing written.
    open_all_week(&app).await;
    let first = free_starts(&app).await.into_iter().next().unwrap();
    let off_grid = first
        .replace(":00:00Z", ":07:00Z")
        .replace(":30:00Z", ":37:00Z");
    for (start, name, email, words) in [
        (
            off_grid.as_str(),
            "Eve",
            "eve@example.com",
            "is not one of the times",
        ),
        (
            "2001-01-01T09:00:00Z",
            "Eve",
            "eve@example.com",
            "has passed",
        ),
        ("tomorrow at nine", "Eve", "eve@example.com", "RFC 3339"),
        (first.as_str(), "Eve", "not an address", "The email address"),
        (
            first.as_str(),
            "E\0ve",
            "eve@example.com",
            "control characters",
        ),
    ] {
        let reply = app
            .post_form("/api/book", &booking_form(start, name, email), None)
            .await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{start}: {}",
            reply.body
        );
        assert!(reply.body.contains(words), "{start}: {}", reply.body);
    }
    assert_eq!(count(&pool, "SELECT count(*) FROM bookings").await, 0);
    assert_eq!(count(&pool, "SELECT count(*) FROM jobs").await, 0);

    // The admin page shows a booking, with its chip.
    let made = app
        .post_form(
            "/api/book",
            &booking_form(&first, "Ada", "ada@example.com"),
            None,
        )
        .await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.body);
    let id = made.json()["id"].as_i64().unwrap();
    let page = app.get_with_cookie("/admin/bookings", &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains(&format!("data-booking-id=\"{id}\"")),
        "{}",
        page.body
    );
    assert!(page.body.contains("data-testid=\"booking-mail-state\""));
    let listed = structured(&app.call_tool("bookings.list", json!({})).await);
    assert_eq!(listed["bookings"][0]["id"], id);
    assert_eq!(listed["bookings"][0]["state"], "confirmed");
    let bad_range = app
        .call_tool("bookings.list", json!({ "from": "yesterday" }))
        .await;
    assert_eq!(bad_range["isError"], json!(true), "{bad_range}");
    let too_many_days = app.call_tool("bookings.slots", json!({ "days": 61 })).await;
    assert_eq!(too_many_days["isError"], json!(true), "{too_many_days}");
}
