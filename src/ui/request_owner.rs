//! Every request starts with no Leptos owner on its thread.
//!
//! Leptos keeps the current owner (the node that reactive state and contexts hang from)
//! in a thread-local. Rendering a page makes the page's root owner the thread's current
//! one and leaves it there (`Owner::new_root`); leptos_axum then makes a server
//! function's owner a child of whatever the thread holds (`Owner::new`). So a server
//! function served on the thread that last started a page, while that page was still
//! being sent, became part of that page:
//! - it read the page's contexts: its answer took the page's nonce, and so its policy;
//! - when the page's last reference went away (its body sent, on the other thread)
//!   while the server function read a context through it, the page was dropped on this
//!   thread, and a page dropped cleans up its children, the server function's owner
//!   among them, whose lock this thread held for the read. The thread waited for itself
//!   for ever: the request never answered (no time limit runs on a stuck thread), and
//!   the process could not stop, as the runtime waits for its threads.
//!
//! [`without_a_thread_owner`] forgets the thread's owner before and after each poll of
//! a request, so that a request's owners start from none, as on a fresh thread. Nothing
//! may count on that thread-local between polls anyway: a task can move to another
//! thread at any of them.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use leptos::prelude::Owner;

/// Middleware (`axum::middleware::from_fn`): the rest of the request runs with no owner
/// left on the thread by another request.
pub fn without_a_thread_owner(
    request: Request,
    next: Next,
) -> impl Future<Output = Response> + Send {
    WithoutThreadOwner(Box::pin(next.run(request)))
}

/// A request's future that finds no thread owner when it runs, and leaves none.
struct WithoutThreadOwner(Pin<Box<dyn Future<Output = Response> + Send>>);

impl Future for WithoutThreadOwner {
    type Output = Response;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        forget_the_thread_owner();
        let polled = self.0.as_mut().poll(cx);
        forget_the_thread_owner();
        polled
    }
}

/// Clears the thread's current owner. Our reference may be the owner's last (its page
/// sent meanwhile): it is dropped at the end, outside `unset`'s borrow of the
/// thread-local and with no owner's lock held, so the owner's cleanup may take both.
fn forget_the_thread_owner() {
    let current = Owner::current();
    if let Some(owner) = &current {
        owner.clone().unset();
    }
    drop(current);
}
