//! Live chips: a page names the jobs it shows unfinished, and hears when one of them
//! changes, over one Server-Sent Events stream (`GET /api/live?ids=…`, see
//! `api::live`). While the stream is not open (it failed, the server refused it with
//! 503, it is reconnecting) the page polls as it did before, once a second; the stream
//! is tried again every few seconds. On the server this does nothing (pages are rendered
//! once there).

use leptos::prelude::*;
use serde::Deserialize;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::tasks::TaskRow;
use crate::model::{JobId, JobState};

/// A job's state as the stream tells it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct LiveJobState {
    pub id: JobId,
    pub state: JobState,
    pub attempt: i16,
    pub errors_count: i32,
}

/// Follows the jobs `watched()` names (read once a second; a new set reopens the
/// stream): `on_change` gets every state the stream sends, and `poll` runs once a
/// second while the stream is not open.
pub fn use_live_jobs(
    watched: impl Fn() -> Vec<JobId> + 'static,
    on_change: impl Fn(LiveJobState) + 'static,
    poll: impl Fn() + 'static,
) {
    #[cfg(feature = "hydrate")]
    browser::follow(watched, on_change, poll);
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = (watched, on_change, poll);
    }
}

/// Calls `on_newest` with the newest access request's id, at once and whenever a newer
/// one arrives, over its own stream (`GET /api/live?requests`, see `api::live`); a
/// stream the server refused is tried again every few seconds. For the access requests
/// list, which shows a visitor's request while it is open.
pub fn use_newest_request(on_newest: impl Fn(i64) + 'static) {
    #[cfg(feature = "hydrate")]
    browser::follow_requests(on_newest);
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = on_newest;
    }
}

/// [`use_live_jobs`] for pages that show job rows: the rows of the jobs that changed are
/// read through the `tasks/rows` server function (once per burst of changes), and while
/// the stream is not open all of `watched()` through the status poll; `apply` gets them.
pub fn use_live_rows(
    watched: impl Fn() -> Vec<JobId> + Clone + 'static,
    apply: impl Fn(Vec<TaskRow>) + Clone + 'static,
) {
    #[cfg(feature = "hydrate")]
    {
        let changed = StoredValue::new(Vec::<JobId>::new());
        let busy = StoredValue::new(false);
        let on_change = {
            let apply = apply.clone();
            move |job: LiveJobState| {
                let first = changed.with_value(Vec::is_empty);
                changed.update_value(|ids| ids.push(job.id));
                if !first {
                    return;
                }
                let apply = apply.clone();
                // Later in this turn: the changes that arrived together go in one read.
                leptos::task::spawn_local(async move {
                    let ids = changed.try_update_value(std::mem::take).unwrap_or_default();
                    if let Ok(rows) = crate::api::tasks::task_rows(ids).await {
                        apply(rows);
                    }
                });
            }
        };
        let poll = {
            let watched = watched.clone();
            move || {
                if busy.get_value() {
                    return;
                }
                let ids = watched();
                if ids.is_empty() {
                    return;
                }
                busy.set_value(true);
                let apply = apply.clone();
                leptos::task::spawn_local(async move {
                    if let Ok(rows) = crate::api::tasks::fetch_job_status(&ids).await {
                        apply(rows);
                    }
                    busy.set_value(false);
                });
            }
        };
        use_live_jobs(watched, on_change, poll);
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = (watched, apply);
    }
}

/// Follows the jobs a resource's value names, and reads the whole resource again when
/// one of them changes (and once a second while the stream is not open): for pages
/// whose rows come whole from one server function (schedules, listings, the account,
/// the corpus). `jobs` names the unfinished jobs of the value.
pub fn refetch_on_jobs<T>(
    resource: Resource<Result<T, ServerFnError>>,
    jobs: impl Fn(&T) -> Vec<JobId> + 'static,
) where
    T: Clone + Send + Sync + Serialize + DeserializeOwned + 'static,
{
    use_live_jobs(
        move || {
            resource
                .get_untracked()
                .and_then(Result::ok)
                .map(|value| jobs(&value))
                .unwrap_or_default()
        },
        move |_| resource.refetch(),
        move || resource.refetch(),
    );
}

/// A row whose chip follows one job (an access request's mail, a booking's
/// notification to the owner).
pub trait FollowsJob: Clone + Send + Sync + 'static {
    /// The job its chip follows, and that job's state as the row last heard it.
    fn followed_job(&self) -> (Option<JobId>, Option<JobState>);
    /// Takes in the job's fresh row (its state moved).
    fn job_moved(&mut self, job: &TaskRow);
}

/// The rows whose job is unfinished follow it live; a row whose job moved takes in the
/// job's fresh row ([`FollowsJob::job_moved`]).
pub fn follow_row_jobs<R: FollowsJob>(rows: RwSignal<Vec<RwSignal<R>>>) {
    let watched = move || {
        rows.with_untracked(|rows| {
            rows.iter()
                .filter_map(|row| {
                    let (job, state) = row.with_untracked(R::followed_job);
                    job.filter(|_| state.is_some_and(|state| !state.is_terminal()))
                })
                .collect::<Vec<JobId>>()
        })
    };
    use_live_rows(watched, move |jobs| {
        rows.with_untracked(|rows| {
            for row in rows {
                let (followed, known) = row.with_untracked(R::followed_job);
                let Some(job) = jobs.iter().find(|job| Some(job.id) == followed) else {
                    continue;
                };
                if known != Some(job.state) {
                    row.update(|row| row.job_moved(job));
                }
            }
        });
    });
}

#[cfg(feature = "hydrate")]
mod browser {
    use std::rc::Rc;
    use std::time::Duration;

    use leptos::prelude::*;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    use web_sys::{EventSource, MessageEvent};

    use super::LiveJobState;
    use crate::model::JobId;
    use crate::ui::components::poll::use_polling;

    /// How many seconds a stream that closed for good waits before it is tried again.
    const RETRY_AFTER_TICKS: u32 = 5;

    struct Open {
        ids: Vec<JobId>,
        source: EventSource,
        // Kept alive as long as the source calls it.
        _on_job: Closure<dyn FnMut(MessageEvent)>,
    }

    #[derive(Default)]
    struct Stream {
        open: Option<Open>,
        /// Ticks since the last stream closed for good.
        closed_for: u32,
    }

    impl Stream {
        fn close(&mut self) {
            if let Some(open) = self.open.take() {
                open.source.close();
            }
        }
    }

    pub fn follow(
        watched: impl Fn() -> Vec<JobId> + 'static,
        on_change: impl Fn(LiveJobState) + 'static,
        poll: impl Fn() + 'static,
    ) {
        let on_change: Rc<dyn Fn(LiveJobState)> = Rc::new(on_change);
        // Local: an EventSource lives in this browser thread only.
        let stream = StoredValue::new_local(Stream::default());
        on_cleanup(move || {
            stream.try_update_value(Stream::close);
        });

        let tick = move || {
            let mut ids = watched();
            ids.sort_unstable();
            ids.dedup();
            ids.truncate(100);
            let should_poll = stream
                .try_update_value(|stream| {
                    if ids.is_empty() {
                        stream.close();
                        return false;
                    }
                    let state = stream
                        .open
                        .as_ref()
                        .map(|open| (open.ids == ids, open.source.ready_state()));
                    match state {
                        // Open and following the right jobs: nothing to do.
                        Some((true, EventSource::OPEN)) => false,
                        // Reconnecting by itself: poll meanwhile.
                        Some((true, EventSource::CONNECTING)) => true,
                        // Closed for good (refused, or gone): poll, and try again now
                        // and then.
                        Some((true, _)) => {
                            stream.closed_for += 1;
                            if stream.closed_for >= RETRY_AFTER_TICKS {
                                stream.close();
                                stream.closed_for = 0;
                                stream.open = open(&ids, on_change.clone());
                            }
                            true
                        }
                        // New jobs to follow, or none followed yet: its first states
                        // are on their way.
                        _ => {
                            stream.close();
                            stream.closed_for = 0;
                            stream.open = open(&ids, on_change.clone());
                            stream.open.is_none()
                        }
                    }
                })
                .unwrap_or(false);
            if should_poll {
                poll();
            }
        };
        use_polling(Duration::from_secs(1), tick);
    }

    /// The stream of the newest access request, and its listener.
    struct RequestsStream {
        source: EventSource,
        _on_newest: Closure<dyn FnMut(MessageEvent)>,
    }

    #[derive(serde::Deserialize)]
    struct NewestRequest {
        newest: i64,
    }

    pub fn follow_requests(on_newest: impl Fn(i64) + 'static) {
        let on_newest: Rc<dyn Fn(i64)> = Rc::new(on_newest);
        let open = move || -> Option<RequestsStream> {
            let source = EventSource::new("/api/live?requests").ok()?;
            let on_newest = on_newest.clone();
            let listener = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
                let newest = event
                    .data()
                    .as_string()
                    .and_then(|data| serde_json::from_str::<NewestRequest>(&data).ok());
                if let Some(NewestRequest { newest }) = newest {
                    on_newest(newest);
                }
            });
            source
                .add_event_listener_with_callback(
                    "access_requests",
                    listener.as_ref().unchecked_ref(),
                )
                .ok()?;
            Some(RequestsStream {
                source,
                _on_newest: listener,
            })
        };
        let stream = StoredValue::new_local((open(), 0_u32));
        on_cleanup(move || {
            stream.try_update_value(|(open, _)| {
                if let Some(open) = open.take() {
                    open.source.close();
                }
            });
        });
        // The browser reconnects a stream that dropped by itself; one the server
        // refused (503: too many streams) is closed for good, and opened again here.
        use_polling(Duration::from_secs(1), move || {
            stream.try_update_value(|(current, closed_for)| {
                let closed = current
                    .as_ref()
                    .is_none_or(|now| now.source.ready_state() == EventSource::CLOSED);
                if !closed {
                    return;
                }
                *closed_for += 1;
                if *closed_for >= RETRY_AFTER_TICKS {
                    *closed_for = 0;
                    if let Some(old) = current.take() {
                        old.source.close();
                    }
                    *current = open();
                }
            });
        });
    }

    fn open(ids: &[JobId], on_change: Rc<dyn Fn(LiveJobState)>) -> Option<Open> {
        let list = ids
            .iter()
            .map(JobId::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let source = EventSource::new(&format!("/api/live?ids={list}")).ok()?;
        let on_job = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            let Some(data) = event.data().as_string() else {
                return;
            };
            if let Ok(job) = serde_json::from_str::<LiveJobState>(&data) {
                on_change(job);
            }
        });
        source
            .add_event_listener_with_callback("job", on_job.as_ref().unchecked_ref())
            .ok()?;
        Some(Open {
            ids: ids.to_vec(),
            source,
            _on_job: on_job,
        })
    }
}
