//! Talking to a `standmeet serve` child the way its clients do: a browser's server
//! function calls (signed in as an admin, from our own origin) and an agent's MCP calls
//! (JSON-RPC with the bearer token).
//!
//! Server functions live under `/api/<endpoint>` (leptos_axum's default prefix and the
//! `endpoint` of each `#[server]`); their arguments are a form (POST) or a query string
//! (`GetUrl`). The MCP endpoint is stateless, so a `tools/call` needs no `initialize`.

use std::time::Duration;

use anyhow::{Context, bail};
use reqwest::Method;
use serde_json::{Value, json};

use super::process::ServerChild;
use standmeet::startup::SESSION_COOKIE;

/// An answer: its status and its body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub body: String,
}

#[derive(Clone)]
pub(crate) struct ServerClient {
    http: reqwest::Client,
    base_url: String,
    mcp_token: String,
    /// `standmeet_session=…`, for the `Cookie` header.
    session_cookie: String,
}

impl ServerClient {
    /// Signs in as the server's admin (`POST /login`, a form, as the sign-in page
    /// sends it) and keeps the session cookie.
    pub async fn sign_in(server: &ServerChild) -> anyhow::Result<ServerClient> {
        let http = reqwest::Client::builder()
            // A proxy from the environment must not stand between us and loopback.
            .no_proxy()
            // The sign-in answers with a redirect whose cookie we want, not its target.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(60))
            .build()?;
        let reply = http
            .post(format!("{}/login", server.base_url))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("sec-fetch-site", "same-origin")
            .body(form_body(&[
                ("email", server.admin_email.as_bytes()),
                ("password", server.admin_password.as_bytes()),
            ]))
            .send()
            .await
            .context("cannot reach the server to sign in")?;
        let location = reply
            .headers()
            .get("location")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let prefix = format!("{SESSION_COOKIE}=");
        let cookie = reply
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .find(|value| value.starts_with(&prefix))
            .map(|value| value.split(';').next().unwrap_or_default().to_string());
        match cookie {
            // A failed sign-in goes back to /login with the reason.
            Some(session_cookie) if !location.starts_with("/login") => Ok(ServerClient {
                http,
                base_url: server.base_url.clone(),
                mcp_token: server.mcp_token.clone(),
                session_cookie,
            }),
            _ => bail!(
                "signing in as the chaos admin failed: {} to {location:?}",
                reply.status()
            ),
        }
    }

    /// Calls a server function: `path_and_query` is below `/api/`; `body` (with its
    /// content type) is sent when given.
    pub async fn server_fn(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> Result<Answer, reqwest::Error> {
        let mut request = self
            .http
            .request(method, format!("{}/api/{path_and_query}", self.base_url))
            .header("cookie", self.session_cookie.as_str())
            .header("sec-fetch-site", "same-origin")
            .header("accept", "application/json");
        if let Some((content_type, body)) = body {
            request = request.header("content-type", content_type).body(body);
        }
        answer(request.send().await?).await
    }

    /// Posts `body` to `path` (a page's form, such as `/login`) as the signed-in
    /// browser would.
    pub async fn post_page(
        &self,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<Answer, reqwest::Error> {
        let request = self
            .http
            .post(format!("{}{path}", self.base_url))
            .header("cookie", self.session_cookie.as_str())
            .header("sec-fetch-site", "same-origin")
            .header("content-type", content_type)
            .body(body);
        answer(request.send().await?).await
    }

    /// Posts `body` (raw bytes: it need not be JSON) to `/mcp`.
    pub async fn mcp(&self, body: Vec<u8>) -> Result<Answer, reqwest::Error> {
        let reply = self
            .http
            .post(format!("{}/mcp", self.base_url))
            .bearer_auth(&self.mcp_token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body)
            .send()
            .await?;
        answer(reply).await
    }

    /// `tools/call` of `tool` with `arguments`.
    pub async fn mcp_tool(&self, tool: &str, arguments: Value) -> Result<Answer, reqwest::Error> {
        let call = json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": { "name": tool, "arguments": arguments },
        });
        self.mcp(call.to_string().into_bytes()).await
    }

    /// Opens `GET /api/live?ids=…` (Server-Sent Events) as the signed-in admin; the
    /// answer's body is the stream. Its client has no overall time limit: a stream
    /// lasts as long as the scenario reads it.
    pub async fn live(&self, ids: &[i64]) -> anyhow::Result<reqwest::Response> {
        let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
        let streaming = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        let reply = streaming
            .get(format!("{}/api/live?ids={}", self.base_url, ids.join(",")))
            .header("cookie", self.session_cookie.as_str())
            .send()
            .await
            .context("cannot open a live stream")?;
        if reply.status() != reqwest::StatusCode::OK {
            bail!("the live stream answered {}", reply.status());
        }
        Ok(reply)
    }

    /// `GET /healthz`'s body, whatever its status; `None` when it does not answer.
    pub async fn health(&self) -> Option<Value> {
        let reply = self
            .http
            .get(format!("{}/healthz", self.base_url))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .ok()?;
        reply.json().await.ok()
    }

    /// `GET /healthz` answers 200.
    pub async fn healthy(&self) -> bool {
        matches!(
            self.http.get(format!("{}/healthz", self.base_url)).send().await,
            Ok(reply) if reply.status() == reqwest::StatusCode::OK
        )
    }
}

async fn answer(reply: reqwest::Response) -> Result<Answer, reqwest::Error> {
    let status = reply.status().as_u16();
    let body = reply.text().await?;
    Ok(Answer { status, body })
}

/// `application/x-www-form-urlencoded` from names and raw values (which need not be
/// UTF-8: each byte is percent-encoded as it is).
pub(crate) fn form_body(fields: &[(&str, &[u8])]) -> Vec<u8> {
    let encode = |bytes: &[u8]| url::form_urlencoded::byte_serialize(bytes).collect::<String>();
    fields
        .iter()
        .map(|(name, value)| format!("{}={}", encode(name.as_bytes()), encode(value)))
        .collect::<Vec<_>>()
        .join("&")
        .into_bytes()
}

/// Whether an MCP answer is a successful tool result (not a JSON-RPC error, not a
/// tool error).
pub(crate) fn mcp_succeeded(answer: &Answer) -> bool {
    let Ok(body) = serde_json::from_str::<Value>(&answer.body) else {
        return false;
    };
    answer.status == 200 && body.get("error").is_none() && body["result"]["isError"] != true
}
