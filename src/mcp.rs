//! The MCP endpoint `/mcp`: the operations of StandMeet as tools for agents, over
//! Streamable HTTP (rmcp), behind the bearer token `STANDMEET_MCP_TOKEN`.
//!
//! Each tool calls the same domain operation as the page that does the same thing, and
//! answers a JSON object, both as `structuredContent` and as one text item. What an
//! agent asked for wrongly (bad arguments, an unknown id, a request that is not
//! pending) is a tool error (`isError: true`) whose message says what was wrong; a
//! missing or wrong token is 401 before any tool runs.
//!
//! The endpoint is stateless and answers plain JSON: every call stands on its own, so
//! an agent needs no session, and any copy of StandMeet can answer it.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::api::access::server::view as request_view;
use crate::api::tasks::PAGE_SIZE;
use crate::domain::access_requests::{self, RequestStatus};
use crate::domain::bookings::{self, Actor, AvailabilityChange, BookingError, NewBooking};
use crate::domain::corpus::{self, CorpusError, Written};
use crate::domain::events::{self, EventType};
use crate::domain::listings::{self, ListingsError};
use crate::domain::webhooks;
use crate::error::AppError;
use crate::model::MailState;
use crate::security::bearer::{bearer_token, constant_time_eq};
use crate::security::rate_limit::FailedAttempts;
use crate::state::AppState;
use standmeet_jobs::{JobFilter, JobId, JobState, JobSummary, WaitOutcome};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListRequestsParams {
    /// Only requests with this status: pending, approved, replied or denied.
    pub status: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ApproveParams {
    /// The id of the access request to approve.
    pub id: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetTaskParams {
    /// The id of the job.
    pub job_id: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListEventsParams {
    /// Only events of this type, such as access_request.replied.
    #[serde(rename = "type")]
    pub event_type: Option<String>,
    /// Only events after this id (the `next_after_id` of the previous page).
    pub after_id: Option<i64>,
    /// How many events, oldest first (1 to 1000; 100 when not given).
    pub limit: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetEventParams {
    /// The id of the event.
    pub id: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateWebhookParams {
    /// Where the deliveries go: an http or https URL.
    pub url: String,
    /// The event types it gets, such as ["access_request.created"], or ["*"] for all.
    pub event_types: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebhookIdParams {
    /// The id of the webhook endpoint.
    pub id: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct QueueParams {
    /// The queue's name, as queues.list shows it (e.g. "mail").
    pub queue: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListTasksParams {
    /// Only jobs in this state: available, scheduled, running, retryable, completed,
    /// discarded or cancelled.
    pub state: Option<String>,
    /// Only jobs of this kind, such as access_request.approval_mail.
    pub kind: Option<String>,
    /// How many jobs, newest first (1 to 50; 20 when not given).
    pub limit: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FetchNewParams {
    /// Fetch only these sources (ids from the listings page); every enabled source
    /// when not given.
    pub source_ids: Option<Vec<i64>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FetchResultParams {
    /// The job_ids a jobs.fetch_new answer gave.
    pub job_ids: Vec<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateEntryParams {
    /// The entry's title (1 to 300 characters).
    pub title: String,
    /// The entry's text.
    pub body: String,
    /// public (every visitor, once promoted) or restricted (visitors with an access
    /// code).
    pub visibility: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateEntryParams {
    /// The entry to change.
    pub id: i64,
    /// A new title.
    pub title: Option<String>,
    /// A new text.
    pub body: Option<String>,
    /// public or restricted.
    pub visibility: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct PromoteEntryParams {
    /// The draft entry to promote.
    pub id: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchParams {
    /// What to look for (words; CJK text works without spaces); at most 200
    /// characters.
    pub q: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AvailabilityParams {
    /// The weekly windows, replacing all of them: [{weekday: 1-7 (Monday 1), start:
    /// "HH:MM", end: "HH:MM"}], in the owner's time zone. Unchanged when not given.
    pub windows: Option<Vec<bookings::Window>>,
    /// The length of a slot in minutes (5 to 480).
    pub slot_minutes: Option<i32>,
    /// The free minutes kept between two meetings (0 to 240).
    pub buffer_minutes: Option<i32>,
    /// How many days ahead may be booked, today included (1 to 365).
    pub days_ahead: Option<i32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SlotsParams {
    /// From when (RFC 3339, such as 2026-12-07T00:00:00Z); now when not given.
    pub from: Option<String>,
    /// How many days from `from` (1 to 60; 14 when not given).
    pub days: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListBookingsParams {
    /// Only bookings that start at or after this time (RFC 3339).
    pub from: Option<String>,
    /// Only bookings that start before this time (RFC 3339).
    pub to: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateBookingParams {
    /// The slot's start, as bookings.slots gives it (RFC 3339).
    pub start: String,
    /// Who the meeting is with.
    pub name: String,
    /// Their email address: the invitation goes there.
    pub email: String,
    /// What it is about.
    pub topic: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BookingIdParams {
    /// The id of the booking.
    pub id: i64,
}

/// How long `webhooks.test` waits for its delivery.
const WEBHOOK_TEST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The tools; one value per request, holding the app's state.
#[derive(Clone)]
pub struct Tools {
    state: AppState,
    tool_router: ToolRouter<Self>,
}

/// A tool's answer: the object as structured content and as text, or the tool error
/// [`tool_error`] makes of what went wrong.
fn respond(result: Result<Value, AppError>) -> Result<CallToolResult, ErrorData> {
    Ok(match result {
        Ok(value) => CallToolResult::structured(value),
        Err(err) => tool_error(err),
    })
}

/// What an agent is told when a tool did not do what it asked: `{"error": message}`
/// with `isError: true`. A refusal says what was wrong in the words a page would use; a
/// failure on our side is logged and told in short (see [`AppError`]).
pub fn tool_error(err: AppError) -> CallToolResult {
    CallToolResult::structured_error(json!({ "error": err.public_message() }))
}

#[tool_router]
impl Tools {
    pub fn new(state: AppState) -> Self {
        let tool_router = match state.settings.mcp_tool_names {
            crate::config::ToolNames::Dots => Self::tool_router(),
            crate::config::ToolNames::Underscore => with_underscore_names(Self::tool_router()),
        };
        Tools { state, tool_router }
    }

    #[tool(
        name = "access_requests.list",
        description = "List access requests, newest first, with their status and the state of their approval mail."
    )]
    async fn access_requests_list(
        &self,
        Parameters(params): Parameters<ListRequestsParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let status = match params
            .status
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            None => None,
            Some(word) => match RequestStatus::parse(word) {
                Some(status) => Some(status),
                None => {
                    return respond(Err(AppError::BadRequest(format!(
                        "There is no request status {word:?}; use pending, approved, replied or denied."
                    ))));
                }
            },
        };
        respond(
            access_requests::list(&self.state.pool, status, 200)
                .await
                .map_err(AppError::from)
                .map(|rows| {
                    let requests: Vec<Value> = rows
                        .into_iter()
                        .map(|row| {
                            let view = request_view(row);
                            json!({
                                "id": view.id,
                                "name": view.name,
                                "email": view.email,
                                "message": view.message,
                                "status": view.status,
                                "created": view.created,
                                "mail_state": view.mail_state,
                                "mail_job_id": view.mail_job_id,
                            })
                        })
                        .collect();
                    json!({ "requests": requests })
                }),
        )
    }

    #[tool(
        name = "access_requests.approve",
        description = "Approve a pending access request: the visitor is mailed an access code. Waits briefly for the mail; if it has not gone out yet the answer says pending:true, and tasks.get with mail_job_id tells when it has."
    )]
    async fn access_requests_approve(
        &self,
        Parameters(params): Parameters<ApproveParams>,
    ) -> Result<CallToolResult, ErrorData> {
        respond(self.approve(params.id).await)
    }
    #[tool(
        name = "jobs.fetch_new",
        description = "Fetch new job listings: one fetch per enabled job board (or per source in source_ids), run in parallel. Waits up to 20 s; when every fetch is done the answer is {job_ids, pending:false, listings, errors}, where new:true marks listings no earlier fetch saw. Otherwise it is a receipt {job_ids, pending:true}: pass those job_ids to jobs.fetch_result later."
    )]
    async fn jobs_fetch_new(
        &self,
        Parameters(params): Parameters<FetchNewParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let state = &self.state;
        let answer = listings::fetch_new(
            &state.pool,
            &state.jobs,
            state.settings.fetch_wait,
            params.source_ids.as_deref(),
        )
        .await;
        respond(fetch_answer(answer))
    }

    #[tool(
        name = "jobs.fetch_result",
        description = "Redeem a jobs.fetch_new receipt: with its job_ids, the same answer jobs.fetch_new gives when its fetches finish in time ({job_ids, pending:false, listings, errors}), or {job_ids, pending:true} while one still runs."
    )]
    async fn jobs_fetch_result(
        &self,
        Parameters(params): Parameters<FetchResultParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let ids: Vec<JobId> = params.job_ids.into_iter().map(JobId).collect();
        respond(fetch_answer(
            listings::fetch_result(&self.state.pool, &self.state.jobs, &ids).await,
        ))
    }

    #[tool(
        name = "corpus.create",
        description = "Write a draft corpus entry. Waits up to 2 s for it to be indexed and answers {id, indexed, index_job_id}; indexed:true means a search right after finds it (once promoted)."
    )]
    async fn corpus_create(
        &self,
        Parameters(params): Parameters<CreateEntryParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let written = corpus::create(
            &self.state.pool,
            &params.title,
            &params.body,
            &params.visibility,
        )
        .await;
        self.corpus_receipt(written).await
    }

    #[tool(
        name = "corpus.update",
        description = "Change a corpus entry's title, body or visibility (only the ones given). Answers {id, indexed, index_job_id} like corpus.create."
    )]
    async fn corpus_update(
        &self,
        Parameters(params): Parameters<UpdateEntryParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let written = corpus::update(
            &self.state.pool,
            params.id,
            params.title.as_deref(),
            params.body.as_deref(),
            params.visibility.as_deref(),
        )
        .await;
        self.corpus_receipt(written).await
    }

    #[tool(
        name = "corpus.promote",
        description = "Promote a draft corpus entry so visitors can find it. Answers {id, indexed, index_job_id} like corpus.create."
    )]
    async fn corpus_promote(
        &self,
        Parameters(params): Parameters<PromoteEntryParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let written = corpus::promote(&self.state.pool, params.id).await;
        self.corpus_receipt(written).await
    }

    #[tool(
        name = "corpus.search",
        description = "Search the promoted public corpus entries, best first: {q, results: [{id, title, snippet}]}, matched terms in **bold**. An empty result list means nothing matched."
    )]
    async fn corpus_search(
        &self,
        Parameters(params): Parameters<SearchParams>,
    ) -> Result<CallToolResult, ErrorData> {
        // An agent holds no visitor session, so it sees what any visitor sees.
        respond(
            corpus::search(&self.state.pool, &params.q, false)
                .await
                .map_err(AppError::from)
                .map(|hits| {
                    json!({
                        "q": params.q.trim(),
                        "results": hits.into_iter().map(|hit| json!({
                            "id": hit.id,
                            "title": hit.title,
                            "snippet": corpus::text::snippet_text(&hit.snippet),
                        })).collect::<Vec<_>>(),
                    })
                }),
        )
    }

    #[tool(
        name = "events.list",
        description = "What happened, oldest first: {events: [{id, type, subject_id, occurred_at, data}], next_after_id}. Pass next_after_id as after_id for the next page; it is null when there is no more."
    )]
    async fn events_list(
        &self,
        Parameters(params): Parameters<ListEventsParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let event_type = match params.event_type.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(name) => match EventType::parse(name) {
                Some(event_type) => Some(event_type),
                None => {
                    let known: Vec<_> = EventType::ALL.iter().map(|t| t.as_str()).collect();
                    return respond(Err(AppError::BadRequest(format!(
                        "There is no event type {name:?}; the types are {}.",
                        known.join(", ")
                    ))));
                }
            },
        };
        let limit = params.limit.unwrap_or(100);
        if !(1..=1_000).contains(&limit) {
            return respond(Err(AppError::BadRequest(format!(
                "limit must be from 1 to 1000; it was {limit}."
            ))));
        }
        // One more than asked, to tell whether another page follows.
        let found = events::list(&self.state.pool, event_type, params.after_id, limit + 1).await;
        respond(found.map_err(AppError::from).map(|mut page| {
            let more = page.len() as i64 > limit;
            page.truncate(limit as usize);
            let next_after_id = if more {
                page.last().map(|e| e.id)
            } else {
                None
            };
            json!({ "events": page, "next_after_id": next_after_id })
        }))
    }

    #[tool(
        name = "events.get",
        description = "One event by id: {id, type, subject_id, occurred_at, data}."
    )]
    async fn events_get(
        &self,
        Parameters(params): Parameters<GetEventParams>,
    ) -> Result<CallToolResult, ErrorData> {
        respond(match events::get(&self.state.pool, params.id).await {
            Ok(Some(event)) => Ok(json!(event)),
            Ok(None) => Err(AppError::NotFound(format!(
                "There is no event {}.",
                params.id
            ))),
            Err(err) => Err(err.into()),
        })
    }

    #[tool(
        name = "webhooks.list",
        description = "The webhook endpoints: {webhooks: [{id, url, event_types, enabled, disabled_reason, created_at}]} (never their secrets)."
    )]
    async fn webhooks_list(&self) -> Result<CallToolResult, ErrorData> {
        let listed = webhooks::list(&self.state.pool).await;
        respond(
            listed
                .map(|endpoints| json!({ "webhooks": endpoints }))
                .map_err(AppError::from),
        )
    }

    #[tool(
        name = "webhooks.create",
        description = "Adds a webhook endpoint that gets events of event_types (or [\"*\"] for all) as signed POSTs (Standard Webhooks). Answers {id, url, event_types, enabled, disabled_reason, created_at, secret}; the secret (whsec_…) is shown only now."
    )]
    async fn webhooks_create(
        &self,
        Parameters(params): Parameters<CreateWebhookParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let created = webhooks::create(
            &self.state.pool,
            &params.url,
            &params.event_types,
            self.state.settings.fetch_allow_private,
        )
        .await;
        respond(
            created
                .map(|created| json!(created))
                .map_err(AppError::from),
        )
    }

    #[tool(
        name = "webhooks.delete",
        description = "Deletes a webhook endpoint and its deliveries: {id, deleted: true}."
    )]
    async fn webhooks_delete(
        &self,
        Parameters(params): Parameters<WebhookIdParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let deleted = webhooks::delete(&self.state.pool, params.id).await;
        respond(
            deleted
                .map(|()| json!({ "id": params.id, "deleted": true }))
                .map_err(AppError::from),
        )
    }

    #[tool(
        name = "webhooks.test",
        description = "Sends a webhook.test message to one endpoint only (not an event), waits up to 5 s, and answers {delivery_job_id, state: sending|delivered|failed, response_status, pending}; pending is true while it is still on its way."
    )]
    async fn webhooks_test(
        &self,
        Parameters(params): Parameters<WebhookIdParams>,
    ) -> Result<CallToolResult, ErrorData> {
        respond(self.send_test(params.id).await)
    }

    #[tool(
        name = "bookings.availability",
        description = "Sets what it is given of the owner's availability (weekly windows in the owner's time zone, slot length, buffer, days ahead) and answers the whole of it: {timezone, windows: [{weekday, start, end}], slot_minutes, buffer_minutes, days_ahead}. Call it with no arguments to read it."
    )]
    async fn bookings_availability(
        &self,
        Parameters(params): Parameters<AvailabilityParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let change = AvailabilityChange {
            windows: params.windows,
            slot_minutes: params.slot_minutes,
            buffer_minutes: params.buffer_minutes,
            days_ahead: params.days_ahead,
        };
        if let Err(closed) = bookings::may_book(self.state.settings.booking, Actor::Agent, true) {
            return respond(Err(closed.into()));
        }
        let nothing_to_change = change.windows.is_none()
            && change.slot_minutes.is_none()
            && change.buffer_minutes.is_none()
            && change.days_ahead.is_none();
        let pool = &self.state.pool;
        let owner = if nothing_to_change {
            bookings::availability(pool).await
        } else {
            bookings::set_availability(pool, change).await
        };
        let timezone = bookings::zone_name(&self.state.settings.timezone);
        respond(
            owner
                .map(|owner| {
                    json!({
                        "timezone": timezone,
                        "windows": owner.windows,
                        "slot_minutes": owner.slot_minutes,
                        "buffer_minutes": owner.buffer_minutes,
                        "days_ahead": owner.days_ahead,
                    })
                })
                .map_err(AppError::from),
        )
    }

    #[tool(
        name = "bookings.slots",
        description = "The free slots from `from` (now when not given) for `days` days (1-60, 14 when not given), no further than the owner's days ahead: {slots: [{start, end}]} in RFC 3339 (UTC)."
    )]
    async fn bookings_slots(
        &self,
        Parameters(params): Parameters<SlotsParams>,
    ) -> Result<CallToolResult, ErrorData> {
        respond(self.slots(params).await)
    }

    #[tool(
        name = "bookings.list",
        description = "Bookings that start in [from, to) (both optional, RFC 3339), soonest first, cancelled ones included: {bookings: [{id, start, end, name, email, topic, state: confirmed|cancelled, notify_job_id, confirmation_job_id}]}."
    )]
    async fn bookings_list(
        &self,
        Parameters(params): Parameters<ListBookingsParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let listed = async {
            bookings::may_book(self.state.settings.booking, Actor::Agent, true)?;
            let from = params
                .from
                .as_deref()
                .map(|text| bookings::parse_moment("from", text))
                .transpose()?;
            let to = params
                .to
                .as_deref()
                .map(|text| bookings::parse_moment("to", text))
                .transpose()?;
            let rows = bookings::list(&self.state.pool, from, to, 1_000).await?;
            Ok::<_, AppError>(json!({
                "bookings": rows.iter().map(bookings::Booking::to_json).collect::<Vec<_>>()
            }))
        };
        respond(listed.await)
    }

    #[tool(
        name = "bookings.create",
        description = "Books a free slot (its start from bookings.slots) for someone: the same rules as the /book page. The owner is told and the person gets an invitation by mail (jobs; not waited for). Answers the booking {id, start, end, name, email, topic, state, notify_job_id, confirmation_job_id}; a slot taken meanwhile is a tool error \"That time was just taken\"."
    )]
    async fn bookings_create(
        &self,
        Parameters(params): Parameters<CreateBookingParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let state = &self.state;
        let created = async {
            bookings::may_book(state.settings.booking, Actor::Agent, true)?;
            let new = NewBooking::parse(
                &params.start,
                &params.name,
                &params.email,
                params.topic.as_deref().unwrap_or_default(),
            )?;
            let booking = bookings::create(
                &state.pool,
                &state.settings.timezone,
                crate::api::bookings::server::uid_host(state),
                &new,
                Actor::Agent,
            )
            .await?;
            Ok::<_, BookingError>(booking.to_json())
        };
        respond(created.await.map_err(AppError::from))
    }

    #[tool(
        name = "bookings.cancel",
        description = "Cancels a booking: both sides get a cancellation by mail (a job). Answers the booking with state cancelled."
    )]
    async fn bookings_cancel(
        &self,
        Parameters(params): Parameters<BookingIdParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let cancelled = async {
            bookings::may_book(self.state.settings.booking, Actor::Agent, true)?;
            bookings::cancel(&self.state.pool, params.id, Actor::Agent).await
        };
        respond(
            cancelled
                .await
                .map(|booking| booking.to_json())
                .map_err(AppError::from),
        )
    }

    #[tool(
        name = "tasks.get",
        description = "The state of one job (a task): kind, queue, state, attempts, times and its last error."
    )]
    async fn tasks_get(
        &self,
        Parameters(params): Parameters<GetTaskParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let found = self.state.jobs.summaries(&[JobId(params.job_id)]).await;
        respond(match found.map(|jobs| jobs.into_iter().next()) {
            Ok(Some(job)) => Ok(task_json(job)),
            Ok(None) => Err(AppError::NotFound(format!(
                "There is no job {}.",
                params.job_id
            ))),
            Err(err) => Err(err.into()),
        })
    }

    #[tool(
        name = "tasks.list",
        description = "Jobs (tasks), newest first, optionally of one state and one kind."
    )]
    async fn tasks_list(
        &self,
        Parameters(params): Parameters<ListTasksParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let state = match crate::api::tasks::parse_state_filter(params.state.as_deref()) {
            Ok(state) => state,
            Err(message) => return respond(Err(AppError::BadRequest(message))),
        };
        let limit = params.limit.unwrap_or(20);
        if !(1..=PAGE_SIZE).contains(&limit) {
            return respond(Err(AppError::BadRequest(format!(
                "limit must be from 1 to {PAGE_SIZE}; it was {limit}."
            ))));
        }
        let filter = JobFilter {
            state,
            kind: params
                .kind
                .map(|kind| kind.trim().to_string())
                .filter(|kind| !kind.is_empty()),
            ..Default::default()
        };
        let jobs = self.state.jobs.list(&filter, limit).await;
        respond(
            jobs.map_err(AppError::from).map(
                |jobs| json!({ "tasks": jobs.into_iter().map(task_json).collect::<Vec<_>>() }),
            ),
        )
    }

    #[tool(
        name = "queues.list",
        description = "The job queues: {queues: [{name, paused, counts: {<state>: n}, finished_last_5m, oldest_available_age_s}]}; oldest_available_age_s is null when no job waits."
    )]
    async fn queues_list(&self) -> Result<CallToolResult, ErrorData> {
        let queues = self.state.jobs.queues().await;
        respond(
            queues
                .map(|queues| json!({ "queues": queues }))
                .map_err(AppError::from),
        )
    }

    #[tool(
        name = "queues.pause",
        description = "Pauses a queue in every StandMeet process until it is resumed (it survives restarts): its jobs stay available, running ones finish. Answers the queue as queues.list shows it."
    )]
    async fn queues_pause(
        &self,
        Parameters(params): Parameters<QueueParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let paused = self.state.jobs.pause_queue(&params.queue).await;
        respond(paused.map(|queue| json!(queue)).map_err(AppError::from))
    }

    #[tool(
        name = "queues.resume",
        description = "Resumes a paused queue: the jobs that waited run at once. Answers the queue as queues.list shows it."
    )]
    async fn queues_resume(
        &self,
        Parameters(params): Parameters<QueueParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let resumed = self.state.jobs.resume_queue(&params.queue).await;
        respond(resumed.map(|queue| json!(queue)).map_err(AppError::from))
    }
}

impl Tools {
    /// `bookings.slots`.
    async fn slots(&self, params: SlotsParams) -> Result<Value, AppError> {
        let state = &self.state;
        bookings::may_book(state.settings.booking, Actor::Agent, true)?;
        let days = params.days.unwrap_or(14);
        if !(1..=60).contains(&days) {
            return Err(AppError::BadRequest(format!(
                "days must be from 1 to 60; it was {days}."
            )));
        }
        let from = match params.from.as_deref() {
            Some(text) => bookings::parse_moment("from", text)?,
            None => jiff::Timestamp::now(),
        };
        let until = from
            .checked_add(jiff::SignedDuration::from_hours(24 * days))
            .unwrap_or(jiff::Timestamp::MAX);
        let slots =
            bookings::free_slots(&state.pool, &state.settings.timezone, from, until).await?;
        Ok(json!({
            "slots": slots
                .iter()
                .map(|slot| json!({ "start": slot.start.to_string(), "end": slot.end.to_string() }))
                .collect::<Vec<_>>()
        }))
    }

    /// `access_requests.approve`: approves, then waits up to `STANDMEET_APPROVE_WAIT_MS`
    /// for the mail, and says whether it went out.
    async fn send_test(&self, id: i64) -> Result<Value, AppError> {
        let queued = webhooks::send_test(&self.state.pool, id).await?;
        self.state
            .jobs
            .wait(&[queued.job_id], WEBHOOK_TEST_WAIT)
            .await?;
        let delivery = webhooks::delivery(&self.state.pool, queued.delivery_id).await?;
        Ok(json!({
            "delivery_job_id": queued.job_id.0,
            "state": delivery.state,
            "response_status": delivery.response_status,
            "pending": delivery.state == webhooks::DeliveryState::Sending,
        }))
    }

    async fn approve(&self, id: i64) -> Result<Value, AppError> {
        let state = &self.state;
        let job = access_requests::approve(&state.pool, &state.mailer, id, None).await?;
        tracing::info!(
            request.id = id,
            job.id = job.0,
            "an agent approved an access request"
        );
        let waited = state.jobs.wait(&[job], state.settings.approve_wait).await;
        let job_state = match waited {
            Ok(WaitOutcome::Done(rows)) => rows.first().map(|row| row.state),
            Ok(WaitOutcome::Receipt) | Err(_) => state
                .jobs
                .get(job)
                .await
                .ok()
                .flatten()
                .map(|row| row.state),
        }
        .unwrap_or(JobState::Available);
        let status = access_requests::get(&state.pool, id)
            .await?
            .map_or(RequestStatus::Approved, |row| row.status);
        let mail_state = MailState::of_job(job_state);
        let done = mail_state == MailState::Sent && status == RequestStatus::Replied;
        Ok(json!({
            "request_id": id,
            "status": status.as_str(),
            "mail_state": mail_state.as_str(),
            "mail_job_id": job.0,
            "pending": !done,
        }))
    }

    /// Waits for a corpus write's index job, then answers its receipt.
    async fn corpus_receipt(
        &self,
        written: Result<Written, CorpusError>,
    ) -> Result<CallToolResult, ErrorData> {
        let state = &self.state;
        let receipt = async {
            let receipt = corpus::receipt(
                &state.pool,
                &state.jobs,
                state.settings.index_wait,
                written?,
            )
            .await?;
            serde_json::to_value(receipt).map_err(|err| AppError::Internal(err.into()))
        };
        respond(receipt.await)
    }
}

/// The same tools named with underscores instead of dots (`access_requests_list`), for
/// MCP clients that refuse dots in tool names (`STANDMEET_MCP_TOOL_NAMES=underscore`);
/// descriptions that name other tools name them the same way.
fn with_underscore_names(router: ToolRouter<Tools>) -> ToolRouter<Tools> {
    let dotted: Vec<String> = router
        .list_all()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    let rename = |text: &str| {
        dotted.iter().fold(text.to_string(), |text, name| {
            text.replace(name.as_str(), &name.replace('.', "_"))
        })
    };
    let mut renamed = ToolRouter::new();
    for mut route in router {
        route.attr.name = route.attr.name.replace('.', "_").into();
        if let Some(description) = route.attr.description.as_deref() {
            route.attr.description = Some(rename(description).into());
        }
        renamed.add_route(route);
    }
    renamed
}

/// A listings fetch's answer as a tool's object.
fn fetch_answer(
    answer: Result<crate::model::FetchAnswer, ListingsError>,
) -> Result<Value, AppError> {
    let answer = answer?;
    serde_json::to_value(&answer).map_err(|err| AppError::Internal(err.into()))
}

fn task_json(job: JobSummary) -> Value {
    let when = crate::api::when;
    json!({
        "id": job.id.0,
        "kind": job.kind,
        "queue": job.queue,
        "state": job.state,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "created": when(job.created_at),
        "scheduled": when(job.scheduled_at),
        "finalized": job.finalized_at.map(when),
        "last_error": job.last_error,
    })
}

#[tool_handler(router = self.tool_router, name = "standmeet", version = "0.1.0")]
impl ServerHandler for Tools {}

/// The `/mcp` routes: the tools behind the token check. `None` when no token is set
/// (MCP is off; a log line says so).
pub fn routes(state: &AppState, stop: CancellationToken) -> Option<Router<AppState>> {
    let Some(token) = state.settings.mcp_token.clone() else {
        tracing::info!("MCP is off: set STANDMEET_MCP_TOKEN to serve /mcp");
        return None;
    };
    let mut hosts = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if let Some(host) = state.settings.public_url.host_str() {
        hosts.push(host.to_string());
    }
    hosts.push(state.settings.site_addr.ip().to_string());
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_allowed_hosts(hosts)
        .with_cancellation_token(stop);
    let tools_state = state.clone();
    let service = StreamableHttpService::new(
        move || Ok(Tools::new(tools_state.clone())),
        LocalSessionManager::default().into(),
        config,
    );
    let check = Arc::new(TokenCheck {
        token: Arc::from(token),
        failures: FailedAttempts::per_minute(FAILED_TOKENS_PER_MINUTE),
    });
    Some(
        Router::new()
            .nest_service("/mcp", service)
            .layer(middleware::from_fn_with_state(check, require_token)),
    )
}

/// Failed token attempts one client address may make a minute; then it is refused
/// (429) until its minute is over, whatever it sends.
const FAILED_TOKENS_PER_MINUTE: u32 = 10;

/// What the token check needs: the token, and the failed attempts per address.
struct TokenCheck {
    token: Arc<str>,
    failures: FailedAttempts,
}

/// 401 unless `Authorization: Bearer <STANDMEET_MCP_TOKEN>`; 429 for an address that
/// failed too often this minute.
async fn require_token(
    State(check): State<Arc<TokenCheck>>,
    request: Request,
    next: Next,
) -> Response {
    let address = request
        .extensions()
        .get::<crate::security::client::ClientAddress>()
        .map(|client| client.0);
    if let Some(wait) = address.and_then(|address| check.failures.blocked(address)) {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, wait.as_secs().max(1).to_string())],
            axum::Json(json!({ "error": "Too many attempts with a wrong MCP token from here; wait a minute." })),
        )
            .into_response();
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(bearer_token);
    match given {
        Some(given) if constant_time_eq(given.as_bytes(), check.token.as_bytes()) => {
            next.run(request).await
        }
        _ => {
            if let Some(address) = address {
                check.failures.failed(address);
            }
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                axum::Json(json!({ "error": "MCP needs the bearer token STANDMEET_MCP_TOKEN: Authorization: Bearer <token>" })),
            )
                .into_response()
        }
    }
}
