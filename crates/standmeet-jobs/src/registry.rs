//! The handlers this process can run, by kind. Type-erased so that one producer can run
//! jobs of every kind in its queue.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::kind::{JobContext, JobError, JobKind};
use super::store::OutputJson;

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A handler with its argument and output types erased to JSON text: the arguments
/// as the row holds them, parsed straight into the kind's type, and the output
/// printed straight from it (no `serde_json::Value` in between).
pub(crate) trait ErasedHandler: Send + Sync {
    fn timeout(&self) -> Duration;
    fn defaults(&self) -> KindDefaults;
    fn run(&self, job: JobContext, args: String) -> BoxFuture<Result<OutputJson, JobError>>;
}

struct Typed<K>(Arc<K>);

impl<K: JobKind> ErasedHandler for Typed<K> {
    fn timeout(&self) -> Duration {
        K::TIMEOUT
    }

    fn defaults(&self) -> KindDefaults {
        KindDefaults {
            queue: K::QUEUE,
            max_attempts: K::MAX_ATTEMPTS,
            priority: K::PRIORITY,
            unique_while_running: K::UNIQUE_WHILE_RUNNING,
        }
    }

    fn run(&self, job: JobContext, args: String) -> BoxFuture<Result<OutputJson, JobError>> {
        let handler = self.0.clone();
        Box::pin(async move {
            // Arguments that do not parse will never parse: discard, do not retry.
            let args: K::Args = serde_json::from_str(&args).map_err(|err| {
                JobError::discard(format!("the arguments do not fit a {} job: {err}", K::KIND))
            })?;
            let output = handler.run(job, args).await?;
            OutputJson::of(&output).map_err(|err| {
                JobError::discard(format!("the output cannot be stored as JSON: {err}"))
            })
        })
    }
}

/// What a kind declares about its jobs, for inserting one by the kind's name (a
/// schedule's firing) as its typed insert would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KindDefaults {
    pub queue: &'static str,
    pub max_attempts: i16,
    pub priority: i16,
    pub unique_while_running: bool,
}

/// Which handler runs which kind, and which queues those kinds use.
#[derive(Clone, Default)]
pub struct Registry {
    handlers: HashMap<&'static str, Arc<dyn ErasedHandler>>,
    queues: BTreeSet<&'static str>,
}

impl Registry {
    /// A registry with no kind yet.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Adds `handler` for its kind (replacing an earlier one of the same kind).
    pub fn register<K: JobKind>(mut self, handler: K) -> Self {
        self.handlers
            .insert(K::KIND, Arc::new(Typed(Arc::new(handler))));
        self.queues.insert(K::QUEUE);
        self
    }

    /// The handler for `kind`, with the kind's name as the registry keeps it (a
    /// `&'static str`, which an attempt's context takes without a copy).
    pub(crate) fn handler(&self, kind: &str) -> Option<(&'static str, &Arc<dyn ErasedHandler>)> {
        self.handlers
            .get_key_value(kind)
            .map(|(name, handler)| (*name, handler))
    }

    /// The kinds this registry can run.
    pub fn kinds(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.handlers.keys().copied()
    }

    /// What kind `kind` declares, when this registry can run it.
    pub(crate) fn defaults(&self, kind: &str) -> Option<KindDefaults> {
        self.handlers.get(kind).map(|handler| handler.defaults())
    }

    /// The queues its kinds go to.
    pub fn queues(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.queues.iter().copied()
    }
}
