//! The Tasks panel over HTTP, as adapters of `ops::tasks`: its page, one job's detail,
//! Retry, Cancel and the bulk actions (server functions, admins only), and the status
//! poll `GET /api/jobs/status?ids=…` that every page with live chips uses.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;

use crate::model::JobId;

pub use crate::ops::tasks::{
    FinishedMinute, Moment, PAGE_SIZE, StateCount, TaskActionResult, TaskDetail, TaskPage,
    TaskQuery, TaskRow,
};

/// The rows of one page of the panel, newest first, with the counts by state.
///
/// Every argument that can be all unset (a filter with nothing chosen, a list with no
/// id) is `#[server(default)]`: the URL encoding writes no key for `None` or an empty
/// list, so the server must take a missing argument as its default. The Tasks panel
/// with no row shown polls exactly that (`tests/it/http_surface.rs` checks every
/// server function for it).
#[server(endpoint = "tasks/list", input = GetUrl)]
pub async fn list_tasks(#[server(default)] query: TaskQuery) -> Result<TaskPage, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::tasks::page(&state, admin, &query)
        .await
        .map_err(crate::api::replies::reply)
}

/// One job whole; `None` when there is no such job.
#[server(endpoint = "tasks/detail", input = GetUrl)]
pub async fn get_task(id: JobId) -> Result<Option<TaskDetail>, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::tasks::detail(&state, admin, id)
        .await
        .map_err(crate::api::replies::reply)
}

/// "Retry selected": every selected job a retry applies to, in one transaction.
#[server(endpoint = "tasks/retry_selected")]
pub async fn retry_selected(
    #[server(default)] ids: Vec<JobId>,
) -> Result<TaskActionResult, ServerFnError> {
    bulk(ids, crate::ops::tasks::Bulk::Retry).await
}

/// "Cancel selected": every selected unfinished job, in one transaction.
#[server(endpoint = "tasks/cancel_selected")]
pub async fn cancel_selected(
    #[server(default)] ids: Vec<JobId>,
) -> Result<TaskActionResult, ServerFnError> {
    bulk(ids, crate::ops::tasks::Bulk::Cancel).await
}

/// "Delete selected": every selected finished job, in one transaction.
#[server(endpoint = "tasks/delete_selected")]
pub async fn delete_selected(
    #[server(default)] ids: Vec<JobId>,
) -> Result<TaskActionResult, ServerFnError> {
    bulk(ids, crate::ops::tasks::Bulk::Delete).await
}

#[cfg(feature = "ssr")]
async fn bulk(
    ids: Vec<JobId>,
    action: crate::ops::tasks::Bulk,
) -> Result<TaskActionResult, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::tasks::bulk(&state, admin, ids, action)
        .await
        .map_err(crate::api::replies::reply)
}

/// The panel rows of these jobs (those that exist, at most 100): what a live page reads
/// when the stream (`/api/live`) says a job changed.
#[server(endpoint = "tasks/rows", input = GetUrl)]
pub async fn task_rows(#[server(default)] ids: Vec<JobId>) -> Result<Vec<TaskRow>, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::tasks::rows(&state, admin, ids)
        .await
        .map_err(crate::api::replies::reply)
}

/// Retry: a retryable, discarded or cancelled job runs again now.
#[server(endpoint = "tasks/retry")]
pub async fn retry_task(id: JobId) -> Result<TaskActionResult, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::tasks::retry(&state, admin, id)
        .await
        .map_err(crate::api::replies::reply)
}

/// Cancel: a job that has not run is cancelled at once; a running one is stopped.
#[server(endpoint = "tasks/cancel")]
pub async fn cancel_task(id: JobId) -> Result<TaskActionResult, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::tasks::cancel(&state, admin, id)
        .await
        .map_err(crate::api::replies::reply)
}

/// Asks `GET /api/jobs/status` for these jobs (from the browser): their current rows.
#[cfg(feature = "hydrate")]
pub async fn fetch_job_status(ids: &[JobId]) -> Result<Vec<TaskRow>, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        jobs: Vec<TaskRow>,
    }
    let ids = ids
        .iter()
        .map(JobId::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let response = gloo_net::http::Request::get(&format!("/api/jobs/status?ids={ids}"))
        .send()
        .await
        .map_err(|err| err.to_string())?;
    if !response.ok() {
        return Err(format!("the status poll answered {}", response.status()));
    }
    let answer: Answer = response.json().await.map_err(|err| err.to_string())?;
    Ok(answer.jobs)
}

#[cfg(feature = "ssr")]
pub use crate::ops::tasks::parse_status_ids;

/// The `ids` of a status poll, as the query carries them.
#[cfg(feature = "ssr")]
#[derive(Debug, serde::Deserialize)]
pub struct StatusQuery {
    ids: Option<String>,
}

/// `GET /api/jobs/status?ids=…`: the state of each job in `ids` (comma-separated), for
/// live chips. Answers `{"jobs": [row…], "unknown": [id…]}`; 400 with a message for ids
/// that are not whole numbers, for none, or for more than 100.
#[cfg(feature = "ssr")]
pub async fn job_status(
    axum::extract::State(state): axum::extract::State<crate::state::AppState>,
    axum::extract::Query(query): axum::extract::Query<StatusQuery>,
) -> axum::response::Response {
    use crate::error::AppError;
    use axum::response::IntoResponse;
    let ids = match parse_status_ids(query.ids.as_deref()) {
        Ok(ids) => ids,
        Err(message) => return AppError::BadRequest(message).into_response(),
    };
    match crate::ops::tasks::status(&state, &ids).await {
        Ok((rows, unknown)) => {
            axum::Json(serde_json::json!({ "jobs": rows, "unknown": unknown })).into_response()
        }
        Err(err) => err.into_response(),
    }
}
