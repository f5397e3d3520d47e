//! A TCP relay between StandMeet and PostgreSQL that a scenario can misdirect, the way
//! a network between them misbehaves: it forwards bytes both ways until told to go
//! silent ([`Relay::go_silent`]: every connection open now, and every one opened while
//! it stays silent, gets no byte through again and is never closed, as when a NAT or a
//! load balancer drops its state), and forwards new connections again once healed
//! ([`Relay::heal`]), to wherever it points ([`Relay::point_to`]).
//!
//! Nothing here acknowledges anything on anyone's behalf beyond what TCP itself does:
//! that is the point. A silent connection's peer still gets its TCP acknowledgements
//! (the relay's sockets are alive), so only the application can tell the silence.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

struct State {
    target: Mutex<SocketAddr>,
    /// Connections numbered below this were open when the relay went silent.
    silenced_below: AtomicU64,
    /// Whether new connections are silent from birth.
    silent_now: AtomicBool,
    next_connection: AtomicU64,
}

/// The relay; it stops (closing every connection) when dropped.
pub struct Relay {
    address: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// A relay on a loopback port of its own, to `target`.
    pub async fn start(target: SocketAddr) -> anyhow::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let state = Arc::new(State {
            target: Mutex::new(target),
            silenced_below: AtomicU64::new(0),
            silent_now: AtomicBool::new(false),
            next_connection: AtomicU64::new(0),
        });
        let task = tokio::spawn(accept(listener, state.clone()));
        Ok(Relay {
            address,
            state,
            task,
        })
    }

    /// Where StandMeet connects to reach the database through the relay.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// From now on, connections open now and those opened until [`Relay::heal`] get
    /// nothing through, and stay open.
    pub fn go_silent(&self) {
        self.state.silent_now.store(true, Ordering::SeqCst);
        let next = self.state.next_connection.load(Ordering::SeqCst);
        self.state.silenced_below.fetch_max(next, Ordering::SeqCst);
    }

    /// New connections go through again (the silenced ones stay silent).
    pub fn heal(&self) {
        self.state.silent_now.store(false, Ordering::SeqCst);
    }

    /// New connections go to `target` from now on.
    pub fn point_to(&self, target: SocketAddr) {
        *self.state.target.lock().expect("not poisoned") = target;
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, state: Arc<State>) {
    // Owned here: aborting this task drops every connection's pipes with it.
    let mut connections = JoinSet::new();
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        while connections.try_join_next().is_some() {}
        let number = state.next_connection.fetch_add(1, Ordering::SeqCst);
        let silent_from_birth = state.silent_now.load(Ordering::SeqCst);
        let target = *state.target.lock().expect("not poisoned");
        let state = state.clone();
        connections.spawn(async move {
            let Ok(server) = TcpStream::connect(target).await else {
                return;
            };
            let silent =
                move || silent_from_birth || number < state.silenced_below.load(Ordering::SeqCst);
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            tokio::join!(
                pipe(client_read, server_write, silent.clone()),
                pipe(server_read, client_write, silent),
            );
        });
    }
}

/// Copies `from` to `to` until either ends; once `silent()` says so, swallows
/// everything and never ends.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, silent: impl Fn() -> bool) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        if silent() {
            // Keep both sockets open, say nothing: hold them until the relay stops.
            std::future::pending::<()>().await;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn it_forwards_then_swallows_then_forwards_new_connections_again() {
        // An echo server behind the relay.
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let echo_address = echo.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = echo.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut buffer = [0u8; 64];
                    while let Ok(read) = socket.read(&mut buffer).await {
                        if read == 0 || socket.write_all(&buffer[..read]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let relay = Relay::start(echo_address).await.unwrap();
        let round_trip = |mut socket: TcpStream| async move {
            socket.write_all(b"ping").await.unwrap();
            let mut answer = [0u8; 4];
            let answered = tokio::time::timeout(
                std::time::Duration::from_millis(300),
                socket.read_exact(&mut answer),
            )
            .await;
            (socket, answered.is_ok_and(|read| read.is_ok()))
        };
        let (open, answered) = round_trip(TcpStream::connect(relay.address()).await.unwrap()).await;
        assert!(answered, "forwards");
        relay.go_silent();
        let (_open, answered) = round_trip(open).await;
        assert!(!answered, "an open connection goes silent");
        let (_born_silent, answered) =
            round_trip(TcpStream::connect(relay.address()).await.unwrap()).await;
        assert!(!answered, "so does one opened while silent");
        relay.heal();
        let (_fresh, answered) =
            round_trip(TcpStream::connect(relay.address()).await.unwrap()).await;
        assert!(answered, "a new one goes through once healed");
    }
}
