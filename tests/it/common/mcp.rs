//! Calling StandMeet's MCP endpoint the way an agent does: JSON-RPC over HTTP with the
//! bearer token.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};

/// The token the MCP tests configure.
pub const TOKEN: &str = "test-mcp-token-0123456789-abcdefghij";

/// One JSON-RPC call to /mcp; answers (status, JSON body).
pub async fn rpc(
    app: &Router,
    token: Option<&str>,
    method: &str,
    params: Value,
) -> (StatusCode, Value) {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let mut request = Request::post("/mcp")
        .header("host", "127.0.0.1:3000")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let reply = super::send(app, request.body(Body::from(body.to_string())).unwrap()).await;
    (reply.status, answer_in(&reply.body))
}

/// The JSON-RPC answer in a reply's body: the body itself (plain JSON), or the answer
/// among its Server-Sent Events (an `initialize`, which starts a session, is answered
/// as events), or `Null`.
fn answer_in(body: &str) -> Value {
    if let Ok(json) = serde_json::from_str(body) {
        return json;
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message.get("id").is_some())
        .unwrap_or(Value::Null)
}

pub async fn call(app: &Router, tool: &str, arguments: Value) -> Value {
    let (status, body) = rpc(
        app,
        Some(TOKEN),
        "tools/call",
        json!({ "name": tool, "arguments": arguments }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["result"].clone()
}

/// The result's structured content, after checking it is also the one text item.
pub fn structured(result: &Value) -> Value {
    let content = result["structuredContent"].clone();
    let text = result["content"][0]["text"].as_str().expect("a text item");
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        content,
        "the text item is the same JSON"
    );
    assert_eq!(result["content"].as_array().unwrap().len(), 1);
    content
}
