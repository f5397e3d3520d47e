//! Events as tools: `events.list`, `events.get`, over the operations of `ops::events`
//! (the events page reads the same outbox, newest first).

use rmcp::handler::server::wrapper::Json;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Refusal, Tools};
use crate::ops::events::{Event, EventList};
use crate::ops::{Operator, events};

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
        title = "List events",
        annotations(read_only_hint = true, open_world_hint = false),
        description = "What happened, oldest first. Pass next_after_id as after_id for the next page; it is null when there is no more."
    )]
    async fn events_list(
        &self,
        Parameters(params): Parameters<ListEventsParams>,
    ) -> Result<Json<EventList>, Refusal> {
        let event_type = params.event_type.as_deref();
        Ok(Json(
            events::list(
                &self.state,
                Operator::Agent,
                event_type,
                params.after_id,
                params.limit,
            )
            .await?,
        ))
    }

    #[tool(
        name = "events.get",
        title = "Read an event",
        annotations(read_only_hint = true, open_world_hint = false),
        description = "One event by id."
    )]
    async fn events_get(
        &self,
        Parameters(params): Parameters<GetEventParams>,
    ) -> Result<Json<Event>, Refusal> {
        Ok(Json(
            events::get(&self.state, Operator::Agent, params.id).await?,
        ))
    }
}
