//! The MCP endpoint `/mcp`: the operations of StandMeet as tools for agents, over
//! Streamable HTTP (rmcp), behind the bearer token `STANDMEET_MCP_TOKEN`.
//!
//! Each tool calls the same operation (`ops`) as the page that does the same thing, and
//! answers its view serialized, a JSON object, both as `structuredContent` and as one
//! text item. What an
//! agent asked for wrongly (bad arguments, an unknown id, a request that is not
//! pending) is a tool error (`isError: true`) whose message says what was wrong; a
//! missing or wrong token is 401 before any tool runs.
//!
//! The endpoint is stateless and answers plain JSON: every call stands on its own, so
//! an agent needs no session, and any copy of StandMeet can answer it.
//!
//! The tools live by feature, as the server functions do in `api/`: `access`,
//! `listings`, `corpus`, `events`, `webhooks`, `bookings`, `tasks`, `queues`. This file
//! puts them together, behind the token check.

mod access;
mod bookings;
mod corpus;
mod events;
mod listings;
mod queues;
mod schedules;
mod tasks;
mod webhooks;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, tool_handler};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::error::AppError;
use crate::security::bearer::{bearer_token, constant_time_eq};
use crate::security::rate_limit::FailedAttempts;
use crate::state::AppState;

/// The tools; one value per request, holding the app's state.
#[derive(Clone)]
pub struct Tools {
    state: AppState,
    tool_router: ToolRouter<Self>,
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
/// failure on our side is logged and told in short (see [`AppError`]).
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
        Tools { state, tool_router }
    }

    /// Every feature's tools, as the pages have them (`api/`).
    fn every_tool() -> ToolRouter<Self> {
        Self::access_tools()
            + Self::listings_tools()
            + Self::corpus_tools()
            + Self::events_tools()
            + Self::webhooks_tools()
            + Self::bookings_tools()
            + Self::tasks_tools()
            + Self::queues_tools()
            + Self::schedules_tools()
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

#[tool_handler(router = self.tool_router, name = "standmeet", version = "0.1.0")]
impl ServerHandler for Tools {
    /// Every tool call, in a span of its own under the HTTP request that carried it
    /// (when exporting traces; see `telemetry::otel`).
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        let span = crate::telemetry::otel::tool_call_span(
            &request.name,
            context.extensions.get::<axum::http::request::Parts>(),
        );
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        tracing::Instrument::instrument(self.tool_router.call(call), span).await
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
