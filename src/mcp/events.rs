//! Events as tools: `events.list`, `events.get` (as `api::events`).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Tools, respond};
use crate::domain::events::{self, EventType};
use crate::error::AppError;
use crate::ops::paging::{one_page, parse_filter};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetEventParams {
    /// The id of the event.
    pub id: i64,
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

#[tool_router(router = events_tools, vis = "pub(super)")]
impl Tools {
    #[tool(
        name = "events.list",
        description = "What happened, oldest first: {events: [{id, type, subject_id, occurred_at, data}], next_after_id}. Pass next_after_id as after_id for the next page; it is null when there is no more."
    )]
    async fn events_list(
        &self,
        Parameters(params): Parameters<ListEventsParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let event_type = match parse_filter::<EventType>(params.event_type.as_deref()) {
            Ok(event_type) => event_type,
            Err(err) => return respond(Err(err)),
        };
        let limit = params.limit.unwrap_or(100);
        if !(1..=1_000).contains(&limit) {
            return respond(Err(AppError::BadRequest(format!(
                "limit must be from 1 to 1000; it was {limit}."
            ))));
        }
        let found = one_page(limit, |limit| {
            events::list(&self.state.pool, event_type, params.after_id, limit)
        })
        .await;
        respond(found.map_err(AppError::from).map(|(page, more)| {
            let next_after_id = more.then(|| page.last().map(|e| e.id)).flatten();
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
}
