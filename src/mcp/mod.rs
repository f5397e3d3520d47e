//! The MCP endpoint `/mcp`: the operations of StandMeet as tools for agents, over
//! Streamable HTTP (rmcp), behind the bearer token `STANDMEET_MCP_TOKEN`.
//!
//! Each tool calls the same operation (`ops`) as the page that does the same thing, and
//! answers its view serialized, a JSON object, both as `structuredContent` and as one
//! text item, with the view's JSON Schema as the tool's `outputSchema` ([`Refusal`]).
//! Every tool has a title and annotations that tell a read from a write. What an agent
//! asked for wrongly (bad arguments, an unknown id, a request that is not pending) is a
//! tool error (`isError: true`) whose message says what was wrong; a missing or wrong
//! token is 401 before any tool runs.
//!
//! A call needs no session, and any copy of StandMeet can answer it; a client that
//! starts with `initialize` gets one, for progress, cancellation and subscriptions
//! (`transport`). A tool that waits for its jobs reports progress and stops waiting when
//! cancelled (`progress`); jobs are resources an agent can read and subscribe to
//! (`resources`).
//!
//! The tools live by feature, as the server functions do in `api/`: `access`,
//! `listings`, `corpus`, `events`, `webhooks`, `bookings`, `tasks`, `queues`,
//! `schedules`. This file puts them together, behind the token check.

mod access;
mod bookings;
mod corpus;
mod events;
mod listings;
mod progress;
mod queues;
mod receipts;
mod resources;
mod schedules;
mod tasks;
mod transport;
mod webhooks;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{
    CallToolResponse, CallToolResult, Implementation, JsonObject, ListResourceTemplatesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::service::SubscriptionContext;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::error::AppError;
use crate::security::bearer::{bearer_token, constant_time_eq};
use crate::security::rate_limit::FailedAttempts;
use crate::state::AppState;

/// The tools; one value per request, holding the app's state.
/// The tools and the job resources; one value per MCP session (or per call, for a
/// call made without one), holding the app's state and the session's subscriptions.
#[derive(Clone)]
pub struct Tools {
    state: AppState,
    tool_router: ToolRouter<Self>,
    subscriptions: Arc<resources::Subscriptions>,
}

/// Why a tool did not do what it was asked, as the agent is told it: a tool error
/// (`isError: true`) carrying `{"error": message}` ([`tool_error`]).
///
/// A tool answers `Result<Json<View>, Refusal>`: the view serialized as structured
/// content and as text, and, because the `#[tool]` macro reads `Json<View>` off the
/// signature, the view's JSON Schema as the tool's `outputSchema`. The schema is made
/// from the very type the answer is made from, so they cannot drift apart.
pub struct Refusal(AppError);

impl From<AppError> for Refusal {
    fn from(err: AppError) -> Self {
        Refusal(err)
    }
}

impl IntoCallToolResult for Refusal {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        Ok(tool_error(self.0).into())
    }
}

/// What an agent is told when a tool did not do what it asked: `{"error": message}`
/// with `isError: true`. A refusal says what was wrong in the words a page would use; a
/// failure on our side is logged and told in short (see [`AppError`]). Every tool's
/// output schema allows it beside the tool's answer ([`output_schema`]).
pub fn tool_error(err: AppError) -> CallToolResult {
    CallToolResult::structured_error(json!({ "error": err.public_message() }))
}

impl Tools {
    pub fn new(state: AppState) -> Self {
        let tools = Self::every_tool();
        let tool_router = match state.settings.mcp_tool_names {
            crate::config::ToolNames::Dots => tools,
            crate::config::ToolNames::Underscore => with_underscore_names(tools),
        };
        Tools {
            state,
            tool_router,
            subscriptions: Arc::default(),
        }
    }

    /// Every feature's tools, as the pages have them (`api/`), their output schemas
    /// without the integer formats ([`output_schema`]).
    fn every_tool() -> ToolRouter<Self> {
        let tools = Self::access_tools()
            + Self::listings_tools()
            + Self::corpus_tools()
            + Self::events_tools()
            + Self::webhooks_tools()
            + Self::bookings_tools()
            + Self::tasks_tools()
            + Self::queues_tools()
            + Self::schedules_tools();
        let mut plain = ToolRouter::new();
        for mut route in tools {
            if let Some(schema) = &route.attr.output_schema {
                route.attr.output_schema = Some(output_schema(&route.attr.name, schema));
            }
            plain.add_route(route);
        }
        plain
    }
}

/// A tool's output schema as clients validate answers with it, made once per tool from
/// the schema of its view (schemars):
/// - the view, or a tool error's `{"error": message}`: clients check any structured
///   content against the output schema, errors too (the official TypeScript SDK throws
///   away an error whose content does not match), so the schema says both;
/// - without the width of every number written as a `format` (`int64`, `uint32`,
///   `double`), which JSON Schema does not define and which that SDK's validator warns
///   about, once per field, on every tool list; the range stays in `minimum` and
///   `maximum`.
fn output_schema(tool: &str, schema: &Arc<JsonObject>) -> Arc<JsonObject> {
    static MADE: LazyLock<Mutex<HashMap<String, Arc<JsonObject>>>> = LazyLock::new(Mutex::default);
    let mut made = MADE.lock().expect("not poisoned");
    made.entry(tool.to_string())
        .or_insert_with(|| {
            let mut view = Value::Object(schema.as_ref().clone());
            drop_integer_formats(&mut view);
            Arc::new(view_or_error(view))
        })
        .clone()
}

/// `{type: object, anyOf: [view, error]}`, the view's definitions kept at the root
/// where its references point.
fn view_or_error(view: Value) -> JsonObject {
    let Value::Object(mut view) = view else {
        unreachable!("an output schema is an object");
    };
    let mut schema = JsonObject::new();
    for key in ["$schema", "$defs"] {
        if let Some(value) = view.remove(key) {
            schema.insert(key.to_string(), value);
        }
    }
    let error = json!({
        "type": "object",
        "description": "A tool error (isError: true): what was wrong, in words.",
        "properties": { "error": { "type": "string" } },
        "required": ["error"]
    });
    schema.insert("type".to_string(), json!("object"));
    schema.insert("anyOf".to_string(), json!([Value::Object(view), error]));
    schema
}

/// Removes the number widths schemars writes as formats (`"format": "int64"`, `uint8`,
/// `double`) from a schema and all it holds; a format JSON Schema defines stays.
fn drop_integer_formats(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            if object
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(is_number_width)
            {
                object.remove("format");
            }
            object.values_mut().for_each(drop_integer_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_integer_formats),
        _ => {}
    }
}

/// `int`, `uint`, `int16`, `uint64`, `float`, `double`.
fn is_number_width(format: &str) -> bool {
    let bits = format
        .strip_prefix("uint")
        .or_else(|| format.strip_prefix("int"));
    matches!(format, "float" | "double")
        || bits.is_some_and(|bits| bits.is_empty() || bits.parse::<u8>().is_ok())
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

/// What an agent is told about StandMeet when it connects.
const INSTRUCTIONS: &str = "StandMeet's operations as tools. A tool that starts slow work \
(mail, fetching, indexing) waits for it up to a limit, sending progress when the request \
has a progressToken; past the limit it answers a receipt (pending: true) naming its jobs \
and their resources, standmeet://jobs/{id}. Read such a resource, or subscribe to it to \
be told when the job is finished.";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("standmeet", "0.1.0"))
            .with_instructions(INSTRUCTIONS.to_string())
    }

    /// Every tool call, in a span of its own under the HTTP request that carried it
    /// (when exporting traces; see `telemetry::otel`), with its waits watched for
    /// progress and cancellation (`progress`).
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        let span = crate::telemetry::otel::tool_call_span(
            &request.name,
            context.extensions.get::<axum::http::request::Parts>(),
        );
        let watching = context.clone();
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        let call = progress::watched(&watching, self.tool_router.call(call));
        tracing::Instrument::instrument(call, span).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Ok(resources::read(&self.state, &request.uri).await?.into())
    }

    // `resources/subscribe` is how the protocol versions before 2026-07-28 (those of the
    // official SDKs today) subscribe; rmcp marks it deprecated for the newer one.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // A call without a session has nowhere to be told later.
        if !transport::in_a_session(context.extensions.get::<axum::http::request::Parts>()) {
            return Err(ErrorData::invalid_request(
                "Subscribing needs a session: start with initialize (or, with protocol \
                 version 2026-07-28, use subscriptions/listen).",
                None,
            ));
        }
        self.subscriptions
            .subscribe(&self.state, &request.uri, context.peer)
            .await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(resources::accepted(requested))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        resources::listen(&self.state, context).await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions.unsubscribe(&request.uri)
    }
}

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
        .with_allowed_hosts(hosts)
        .with_cancellation_token(stop);
    let endpoint = Arc::new(transport::Endpoint::new(state, config));
    let check = Arc::new(TokenCheck {
        token: Arc::from(token),
        failures: FailedAttempts::per_minute(FAILED_TOKENS_PER_MINUTE),
    });
    Some(
        Router::new()
            .route(
                "/mcp",
                axum::routing::any(move |request: Request| {
                    let endpoint = endpoint.clone();
                    async move { endpoint.serve(request).await }
                }),
            )
            .layer(middleware::from_fn(
                crate::telemetry::otel::keep_trace_context,
            ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_widths_leave_the_output_schemas_and_other_formats_stay() {
        let mut schema = json!({
            "type": "object",
            "properties": {
                "id": { "type": "integer", "format": "int64" },
                "n": { "type": "integer", "format": "uint", "minimum": 0 },
                "at": { "type": "string", "format": "date-time" },
                "tries": { "anyOf": [{ "type": "integer", "format": "int16" }, { "type": "null" }] },
                "ratio": { "type": "number", "format": "double" },
                "interval": { "type": "string", "format": "interval" }
            }
        });
        drop_integer_formats(&mut schema);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "id": { "type": "integer" },
                    "n": { "type": "integer", "minimum": 0 },
                    "at": { "type": "string", "format": "date-time" },
                    "tries": { "anyOf": [{ "type": "integer" }, { "type": "null" }] },
                    "ratio": { "type": "number" },
                    "interval": { "type": "string", "format": "interval" }
                }
            })
        );
    }
}
