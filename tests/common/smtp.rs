//! A real SMTP peer on loopback for the tests: it speaks enough SMTP for lettre (no
//! TLS; AUTH PLAIN, whose user and password it keeps), keeps every mail it accepts, and can be told to refuse the next N
//! mails (or every mail until told otherwise) with a reply code, or to hold its answers until the test releases them.
//!
//! Holding and refusing until told otherwise are there so that a test can look at
//! "the mail is on its way" or "the send failed" for as long as its checks take: a
//! fixed delay or a fixed number of failures ends on the clock, and a loaded machine
//! may check too late.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// One mail the peer accepted.
#[derive(Clone, Debug)]
pub struct ReceivedMail {
    pub from: String,
    pub to: Vec<String>,
    pub data: String,
}

impl ReceivedMail {
    /// The body as a reader sees it: after the headers, with a quoted-printable
    /// transfer encoding undone (lettre picks it for long lines, such as links).
    pub fn text(&self) -> String {
        let (headers, body) = self.data.split_once("\n\n").unwrap_or(("", &self.data));
        if headers
            .to_ascii_lowercase()
            .contains("content-transfer-encoding: quoted-printable")
        {
            let decoded = quoted_printable::decode(
                body.replace('\n', "\r\n"),
                quoted_printable::ParseMode::Robust,
            )
            .expect("a quoted-printable body");
            String::from_utf8(decoded)
                .expect("a UTF-8 body")
                .replace("\r\n", "\n")
        } else {
            body.to_string()
        }
    }
}

#[derive(Default)]
struct Behaviour {
    /// Refuse this many more mails, with this reply.
    fail_next: u32,
    fail_reply: String,
    /// Keep this many more mails, then drop the connection instead of answering (the
    /// client cannot tell that the mail arrived).
    drop_after_accepting: u32,
    received: Vec<ReceivedMail>,
    /// The (user, password) of every AUTH PLAIN.
    logins: Vec<(String, String)>,
}

#[derive(Clone)]
pub struct SmtpPeer {
    pub port: u16,
    behaviour: Arc<Mutex<Behaviour>>,
    /// `true` while the answers to mails' data are held.
    held: Arc<watch::Sender<bool>>,
}

impl SmtpPeer {
    pub async fn start() -> SmtpPeer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let behaviour = Arc::new(Mutex::new(Behaviour::default()));
        let held = Arc::new(watch::Sender::new(false));
        let shared = behaviour.clone();
        let gate = held.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(converse(stream, shared.clone(), gate.subscribe()));
            }
        });
        SmtpPeer {
            port,
            behaviour,
            held,
        }
    }

    /// `smtp://127.0.0.1:<port>`, for `STANDMEET_MAIL`.
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Refuses the next `count` mails with `reply` (such as `451 4.3.0 try later`).
    pub fn fail_next(&self, count: u32, reply: &str) {
        let mut behaviour = self.behaviour.lock().unwrap();
        behaviour.fail_next = count;
        behaviour.fail_reply = reply.to_string();
    }

    /// Refuses every mail with `reply` until [`SmtpPeer::stop_refusing`].
    pub fn refuse_every_mail(&self, reply: &str) {
        self.fail_next(u32::MAX, reply);
    }

    /// Takes mails again after [`SmtpPeer::refuse_every_mail`] (or `fail_next`).
    pub fn stop_refusing(&self) {
        self.behaviour.lock().unwrap().fail_next = 0;
    }

    /// Holds the answer to every mail's data (the client waits, its mail on its way)
    /// until [`SmtpPeer::release_answers`]. Senders give up after their own timeout
    /// (10 s for StandMeet's), so release soon.
    pub fn hold_answers(&self) {
        self.held.send_replace(true);
    }

    /// Answers held mails, and the ones after them, as usual again.
    pub fn release_answers(&self) {
        self.held.send_replace(false);
    }

    /// Keeps the next `count` mails but drops the connection instead of saying so.
    pub fn accept_then_drop_next(&self, count: u32) {
        self.behaviour.lock().unwrap().drop_after_accepting = count;
    }

    /// The (user, password) pairs clients signed in with.
    pub fn logins(&self) -> Vec<(String, String)> {
        self.behaviour.lock().unwrap().logins.clone()
    }

    pub fn received(&self) -> Vec<ReceivedMail> {
        self.behaviour.lock().unwrap().received.clone()
    }

    /// The mails sent to `address`.
    pub fn mails_to(&self, address: &str) -> Vec<ReceivedMail> {
        self.received()
            .into_iter()
            .filter(|mail| mail.to.iter().any(|to| to.eq_ignore_ascii_case(address)))
            .collect()
    }
}

async fn converse(
    stream: tokio::net::TcpStream,
    behaviour: Arc<Mutex<Behaviour>>,
    mut held: watch::Receiver<bool>,
) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let _ = write.write_all(b"220 standmeet-test-peer ESMTP\r\n").await;
    let mut from = String::new();
    let mut to = Vec::new();
    while let Ok(Some(line)) = lines.next_line().await {
        let upper = line.to_ascii_uppercase();
        let reply: String = if upper.starts_with("EHLO") {
            "250-standmeet-test-peer\r\n250-AUTH PLAIN\r\n250 8BITMIME\r\n".into()
        } else if upper.starts_with("AUTH PLAIN ") {
            use base64::Engine;
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(line[11..].trim())
                .unwrap_or_default();
            let parts: Vec<String> = String::from_utf8_lossy(&decoded)
                .split('\0')
                .map(str::to_string)
                .collect();
            if let [_, user, password] = parts.as_slice() {
                behaviour
                    .lock()
                    .unwrap()
                    .logins
                    .push((user.clone(), password.clone()));
                "235 2.7.0 Authentication successful\r\n".into()
            } else {
                "501 5.5.2 cannot decode\r\n".into()
            }
        } else if upper.starts_with("HELO")
            || upper.starts_with("RSET")
            || upper.starts_with("NOOP")
        {
            "250 OK\r\n".into()
        } else if upper.starts_with("MAIL FROM:") {
            from = address_in(&line);
            to.clear();
            "250 OK\r\n".into()
        } else if upper.starts_with("RCPT TO:") {
            to.push(address_in(&line));
            "250 OK\r\n".into()
        } else if upper.starts_with("DATA") {
            let _ = write.write_all(b"354 go ahead\r\n").await;
            let mut data = String::new();
            while let Ok(Some(line)) = lines.next_line().await {
                if line == "." {
                    break;
                }
                data.push_str(line.strip_prefix('.').unwrap_or(&line));
                data.push('\n');
            }
            // Held: no answer until the test releases it (or the peer goes away).
            let _ = held.wait_for(|on_hold| !*on_hold).await;
            let mut behaviour = behaviour.lock().unwrap();
            if behaviour.drop_after_accepting > 0 {
                behaviour.drop_after_accepting -= 1;
                behaviour.received.push(ReceivedMail {
                    from: from.clone(),
                    to: to.clone(),
                    data,
                });
                return;
            }
            if behaviour.fail_next > 0 {
                behaviour.fail_next -= 1;
                format!("{}\r\n", behaviour.fail_reply)
            } else {
                behaviour.received.push(ReceivedMail {
                    from: from.clone(),
                    to: to.clone(),
                    data,
                });
                "250 OK queued\r\n".into()
            }
        } else if upper.starts_with("QUIT") {
            let _ = write.write_all(b"221 bye\r\n").await;
            return;
        } else {
            "502 not implemented\r\n".into()
        };
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn address_in(line: &str) -> String {
    line.split_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .map(|(address, _)| address.to_string())
        .unwrap_or_default()
}
