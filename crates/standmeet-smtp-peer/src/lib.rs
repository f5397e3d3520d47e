//! A real SMTP peer on loopback, for the tests and the fault suite alike: it speaks
//! enough SMTP for lettre (no TLS; AUTH PLAIN, whose user and password it keeps), keeps
//! every mail it accepts, and misbehaves on request:
//!
//! - refuse the next N mails (or every mail until told otherwise) with a reply code;
//! - hold its answers until released, or keep a mail and drop the line instead of
//!   answering (the sender cannot tell that the mail arrived);
//! - for the fault suite ([`SmtpPeer::fault_first_tries`]), break the first try of some
//!   recipients, chosen by a hash of the address so a run can be repeated: one in ten
//!   is refused with `451` (a passing failure; the mail is not kept, the sender
//!   retries), one in fifty is kept and then the line is cut before the reply (so the
//!   sender retries, and the recipient gets it twice). Later tries are answered
//!   normally.
//!
//! Holding and refusing until told otherwise are there so that a test can look at "the
//! mail is on its way" or "the send failed" for as long as its checks take: a fixed
//! delay or a fixed number of failures ends on the clock, and a loaded machine may
//! check too late.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// One mail the peer accepted.
#[derive(Clone, Debug)]
pub struct ReceivedMail {
    pub from: String,
    pub to: Vec<String>,
    /// Headers and body, as sent (dot-stuffing undone).
    pub data: String,
}

impl ReceivedMail {
    /// The body as a reader sees it: after the headers, with a quoted-printable
    /// transfer encoding undone (lettre picks it for long lines, such as links).
    pub fn text(&self) -> String {
        let (headers, body) = self.data.split_once("\n\n").unwrap_or(("", &self.data));
        if !headers
            .to_ascii_lowercase()
            .contains("content-transfer-encoding: quoted-printable")
        {
            return body.to_string();
        }
        match quoted_printable::decode(
            body.replace('\n', "\r\n"),
            quoted_printable::ParseMode::Robust,
        ) {
            Ok(decoded) => String::from_utf8_lossy(&decoded).replace("\r\n", "\n"),
            Err(_) => body.to_string(),
        }
    }
}

/// What the peer does to the first try of a recipient, with
/// [`SmtpPeer::fault_first_tries`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    Refuse451,
    DropAfterStoring,
}

/// The fault for `recipient`: by a stable hash (FNV-1a) of the address in lower case.
pub fn fault_for(recipient: &str) -> Fault {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in recipient.to_ascii_lowercase().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    if hash.is_multiple_of(50) {
        Fault::DropAfterStoring
    } else if hash % 10 == 1 {
        Fault::Refuse451
    } else {
        Fault::None
    }
}

#[derive(Default)]
struct Behaviour {
    /// Refuse this many more mails, with this reply.
    fail_next: u32,
    fail_reply: String,
    /// Keep this many more mails, then drop the connection instead of answering.
    drop_after_accepting: u32,
    /// Break first tries by [`fault_for`].
    fault_first_tries: bool,
    /// Tries (mails whose data ended) per recipient, in lower case.
    tries: HashMap<String, u32>,
    received: Vec<ReceivedMail>,
    /// The (user, password) of every AUTH PLAIN.
    logins: Vec<(String, String)>,
    /// First tries refused (451) and first tries kept then cut off, by the faults.
    refused: u64,
    dropped_after_storing: u64,
}

/// What to do with a mail whose data just ended.
enum Answer {
    Keep,
    Refuse(String),
    KeepAndDrop,
}

impl Behaviour {
    fn answer(&mut self, mail: ReceivedMail) -> Answer {
        let mut fault = Fault::None;
        for recipient in &mail.to {
            let tries = self
                .tries
                .entry(recipient.to_ascii_lowercase())
                .or_insert(0);
            *tries += 1;
            if self.fault_first_tries && *tries == 1 && fault == Fault::None {
                fault = fault_for(recipient);
            }
        }
        if self.drop_after_accepting > 0 || fault == Fault::DropAfterStoring {
            self.drop_after_accepting = self.drop_after_accepting.saturating_sub(1);
            self.dropped_after_storing += u64::from(fault == Fault::DropAfterStoring);
            self.received.push(mail);
            return Answer::KeepAndDrop;
        }
        if fault == Fault::Refuse451 {
            self.refused += 1;
            return Answer::Refuse("451 4.3.0 try again later".into());
        }
        if self.fail_next > 0 {
            self.fail_next -= 1;
            return Answer::Refuse(self.fail_reply.clone());
        }
        self.received.push(mail);
        Answer::Keep
    }
}

/// The peer; it stops listening when dropped.
pub struct SmtpPeer {
    pub port: u16,
    behaviour: Arc<Mutex<Behaviour>>,
    /// `true` while the answers to mails' data are held.
    held: Arc<watch::Sender<bool>>,
    accepting: tokio::task::JoinHandle<()>,
}

impl SmtpPeer {
    /// A peer on a free port of 127.0.0.1.
    pub async fn start() -> std::io::Result<SmtpPeer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let behaviour = Arc::new(Mutex::new(Behaviour::default()));
        let held = Arc::new(watch::Sender::new(false));
        let shared = behaviour.clone();
        let gate = held.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(converse(stream, shared.clone(), gate.subscribe()));
            }
        });
        Ok(SmtpPeer {
            port,
            behaviour,
            held,
            accepting,
        })
    }

    fn behaviour(&self) -> std::sync::MutexGuard<'_, Behaviour> {
        self.behaviour.lock().expect("never poisoned")
    }

    /// `smtp://127.0.0.1:<port>`, for `STANDMEET_MAIL`.
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Breaks the first try of some recipients from now on (see the module's
    /// documentation): what the fault suite mails through.
    pub fn fault_first_tries(&self) {
        self.behaviour().fault_first_tries = true;
    }

    /// Refuses the next `count` mails with `reply` (such as `451 4.3.0 try later`).
    pub fn fail_next(&self, count: u32, reply: &str) {
        let mut behaviour = self.behaviour();
        behaviour.fail_next = count;
        behaviour.fail_reply = reply.to_string();
    }

    /// Refuses every mail with `reply` until [`SmtpPeer::stop_refusing`].
    pub fn refuse_every_mail(&self, reply: &str) {
        self.fail_next(u32::MAX, reply);
    }

    /// Takes mails again after [`SmtpPeer::refuse_every_mail`] (or `fail_next`).
    pub fn stop_refusing(&self) {
        self.behaviour().fail_next = 0;
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
        self.behaviour().drop_after_accepting = count;
    }

    /// The (user, password) pairs clients signed in with.
    pub fn logins(&self) -> Vec<(String, String)> {
        self.behaviour().logins.clone()
    }

    /// Every mail kept so far, in order.
    pub fn received(&self) -> Vec<ReceivedMail> {
        self.behaviour().received.clone()
    }

    /// The mails sent to `address`.
    pub fn mails_to(&self, address: &str) -> Vec<ReceivedMail> {
        self.received()
            .into_iter()
            .filter(|mail| mail.to.iter().any(|to| to.eq_ignore_ascii_case(address)))
            .collect()
    }

    /// First tries the faults refused with `451`.
    pub fn refused(&self) -> u64 {
        self.behaviour().refused
    }

    /// First tries the faults kept and then cut off without a reply.
    pub fn dropped_after_storing(&self) -> u64 {
        self.behaviour().dropped_after_storing
    }
}

impl Drop for SmtpPeer {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// One SMTP conversation, until QUIT or the line drops.
async fn converse(
    stream: TcpStream,
    behaviour: Arc<Mutex<Behaviour>>,
    mut held: watch::Receiver<bool>,
) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    if write
        .write_all(b"220 standmeet-smtp-peer ESMTP\r\n")
        .await
        .is_err()
    {
        return;
    }
    let mut from = String::new();
    let mut to = Vec::new();
    while let Ok(Some(line)) = lines.next_line().await {
        let upper = line.to_ascii_uppercase();
        let reply: String = if upper.starts_with("EHLO") {
            "250-standmeet-smtp-peer\r\n250-AUTH PLAIN\r\n250 8BITMIME\r\n".into()
        } else if let Some(credentials) =
            line.get(11..).filter(|_| upper.starts_with("AUTH PLAIN "))
        {
            match plain_login(credentials) {
                Some(login) => {
                    behaviour.lock().expect("never poisoned").logins.push(login);
                    "235 2.7.0 Authentication successful\r\n".into()
                }
                None => "501 5.5.2 cannot decode\r\n".into(),
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
            if write.write_all(b"354 go ahead\r\n").await.is_err() {
                return;
            }
            let mut data = String::new();
            while let Ok(Some(line)) = lines.next_line().await {
                if line == "." {
                    break;
                }
                // Dot-stuffing: a line that starts with a dot was sent with two.
                data.push_str(line.strip_prefix('.').unwrap_or(&line));
                data.push('\n');
            }
            // Held: no answer until the test releases it (or the peer goes away).
            let _ = held.wait_for(|on_hold| !*on_hold).await;
            let mail = ReceivedMail {
                from: from.clone(),
                to: to.clone(),
                data,
            };
            let answer = behaviour.lock().expect("never poisoned").answer(mail);
            match answer {
                Answer::Keep => "250 OK queued\r\n".into(),
                Answer::Refuse(reply) => format!("{reply}\r\n"),
                // Kept, and now the line goes dead: no reply, no QUIT.
                Answer::KeepAndDrop => return,
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

/// The (user, password) of an `AUTH PLAIN` line's base64 credentials.
fn plain_login(credentials: &str) -> Option<(String, String)> {
    use base64::Engine;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(credentials.trim())
        .ok()?;
    let parts: Vec<String> = String::from_utf8_lossy(&decoded)
        .split('\0')
        .map(str::to_string)
        .collect();
    match parts.as_slice() {
        [_, user, password] => Some((user.clone(), password.clone())),
        _ => None,
    }
}

fn address_in(line: &str) -> String {
    line.split_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .map(|(address, _)| address.to_string())
        .unwrap_or_default()
}

/// The access codes in `text`: `XXXX-XXXX-XXXX` of capital letters and digits, not
/// part of a longer run of such characters.
pub fn access_codes_in(text: &str) -> Vec<String> {
    const LEN: usize = 14;
    let bytes = text.as_bytes();
    let code_char = |b: u8| b.is_ascii_uppercase() || b.is_ascii_digit();
    // What may stand next to a code: anything but its own characters and dashes.
    let free = |b: u8| !code_char(b) && b != b'-';
    let mut codes = Vec::new();
    for start in 0..bytes.len().saturating_sub(LEN - 1) {
        let window = &bytes[start..start + LEN];
        let shaped = window.iter().enumerate().all(|(i, &b)| {
            if i == 4 || i == 9 {
                b == b'-'
            } else {
                code_char(b)
            }
        });
        let alone = (start == 0 || free(bytes[start - 1]))
            && (start + LEN == bytes.len() || free(bytes[start + LEN]));
        if shaped && alone {
            codes.push(String::from_utf8_lossy(window).into_owned());
        }
    }
    codes
}
