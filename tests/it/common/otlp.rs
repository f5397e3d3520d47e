//! A trace collector on loopback: real OTLP/HTTP, each request's protobuf decoded with
//! the official definitions (`opentelemetry-proto`), every span kept for the test.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;

/// One span as the collector received it.
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    pub name: String,
    /// Hex, as trace viewers and `traceparent` write them.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for the root of a trace.
    pub parent_span_id: String,
    /// The resource's attributes (`service.name`, `service.instance.id`, …).
    pub resource: HashMap<String, String>,
    pub attributes: HashMap<String, String>,
    /// The span's `tracestate`, as received.
    pub trace_state: String,
    /// The spans it links to: (trace id, span id, their `tracestate`).
    pub links: Vec<(String, String, String)>,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

pub struct TraceCollector {
    pub port: u16,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    requests: Arc<Mutex<usize>>,
}

impl TraceCollector {
    pub async fn start() -> TraceCollector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(0));
        let app = Router::new()
            .route("/v1/traces", axum::routing::post(receive))
            .with_state((spans.clone(), requests.clone()));
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        TraceCollector {
            port,
            spans,
            requests,
        }
    }

    /// What `OTEL_EXPORTER_OTLP_ENDPOINT` is set to (the exporter adds `/v1/traces`).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap().clone()
    }

    /// Export requests received so far.
    pub fn requests(&self) -> usize {
        *self.requests.lock().unwrap()
    }

    /// Waits until the spans received satisfy `enough`; panics after `limit` with
    /// what came.
    pub async fn wait_for(
        &self,
        limit: Duration,
        enough: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let spans = self.spans();
            if enough(&spans) {
                return spans;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the collector did not get the spans within {limit:?}: {spans:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

type Shared = (Arc<Mutex<Vec<ReceivedSpan>>>, Arc<Mutex<usize>>);

async fn receive(State((spans, requests)): State<Shared>, body: Bytes) -> impl IntoResponse {
    *requests.lock().unwrap() += 1;
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, "not an ExportTraceServiceRequest").into_response();
    };
    let mut received = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = resource_spans
            .resource
            .map(|resource| attributes(&resource.attributes))
            .unwrap_or_default();
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                received.push(ReceivedSpan {
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    resource: resource.clone(),
                    attributes: attributes(&span.attributes),
                    trace_state: span.trace_state,
                    links: span
                        .links
                        .iter()
                        .map(|link| {
                            (
                                hex(&link.trace_id),
                                hex(&link.span_id),
                                link.trace_state.clone(),
                            )
                        })
                        .collect(),
                });
            }
        }
    }
    spans.lock().unwrap().extend(received);
    (
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
        .into_response()
}

fn attributes(pairs: &[KeyValue]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|pair| (pair.key.clone(), text(pair.value.as_ref())))
        .collect()
}

fn text(value: Option<&AnyValue>) -> String {
    match value.and_then(|value| value.value.as_ref()) {
        Some(any_value::Value::StringValue(text)) => text.clone(),
        Some(any_value::Value::IntValue(number)) => number.to_string(),
        Some(any_value::Value::BoolValue(flag)) => flag.to_string(),
        Some(any_value::Value::DoubleValue(number)) => number.to_string(),
        other => format!("{other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
