//! A fault-injecting SMTP peer on loopback for the chaos run: it speaks enough SMTP for
//! lettre (no TLS, no AUTH), keeps every mail it stores, and breaks the first try of
//! some recipients, chosen by a hash of the address so a run can be repeated:
//!
//! - one recipient in ten: the first try is refused with `451` (a passing failure; the
//!   mail is not stored, the sender retries);
//! - one recipient in fifty: the first try is stored, then the line is cut before the
//!   reply, so the sender sees a failure although the mail arrived (and retries, so
//!   the recipient gets it twice).
//!
//! Later tries of the same recipient are stored and answered normally.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// One mail the sink stored.
#[derive(Clone, Debug)]
pub struct StoredMail {
    pub recipients: Vec<String>,
    /// The body as a reader sees it (a quoted-printable encoding undone).
    pub text: String,
}

/// What the sink does to the first try of a recipient.
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
struct Ledger {
    /// Tries (mails whose data ended) per recipient, in lower case.
    tries: HashMap<String, u32>,
    stored: Vec<StoredMail>,
    refused: u64,
    dropped_after_storing: u64,
}

pub struct SmtpSink {
    port: u16,
    ledger: Arc<Mutex<Ledger>>,
    accepting: tokio::task::JoinHandle<()>,
}

impl SmtpSink {
    pub async fn start() -> std::io::Result<SmtpSink> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let shared = ledger.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(converse(stream, shared.clone()));
            }
        });
        Ok(SmtpSink {
            port,
            ledger,
            accepting,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn stored(&self) -> Vec<StoredMail> {
        self.ledger.lock().expect("not poisoned").stored.clone()
    }

    /// First tries answered 451.
    pub fn refused(&self) -> u64 {
        self.ledger.lock().expect("not poisoned").refused
    }

    /// First tries stored and then cut off without a reply.
    pub fn dropped_after_storing(&self) -> u64 {
        self.ledger
            .lock()
            .expect("not poisoned")
            .dropped_after_storing
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// One SMTP conversation, until QUIT or the line drops.
async fn converse(stream: TcpStream, ledger: Arc<Mutex<Ledger>>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    if write
        .write_all(b"220 standmeet-chaos-sink ESMTP\r\n")
        .await
        .is_err()
    {
        return;
    }
    let mut recipients: Vec<String> = Vec::new();
    while let Ok(Some(line)) = lines.next_line().await {
        let command = line.to_ascii_uppercase();
        let reply: &str = if command.starts_with("EHLO") {
            "250-standmeet-chaos-sink\r\n250 8BITMIME\r\n"
        } else if command.starts_with("MAIL FROM:") {
            recipients.clear();
            "250 OK\r\n"
        } else if command.starts_with("RCPT TO:") {
            recipients.push(address_in(&line));
            "250 OK\r\n"
        } else if command.starts_with("DATA") {
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
            match take_mail(&ledger, &recipients, &data) {
                Fault::Refuse451 => "451 4.3.0 chaos: try again later\r\n",
                // Stored, and now the line goes dead: no reply, no QUIT.
                Fault::DropAfterStoring => return,
                Fault::None => "250 OK stored\r\n",
            }
        } else if command.starts_with("QUIT") {
            let _ = write.write_all(b"221 bye\r\n").await;
            return;
        } else if command.starts_with("HELO")
            || command.starts_with("RSET")
            || command.starts_with("NOOP")
        {
            "250 OK\r\n"
        } else {
            "502 not implemented\r\n"
        };
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Counts the try, decides its fault, and stores the mail unless it is refused.
fn take_mail(ledger: &Mutex<Ledger>, recipients: &[String], data: &str) -> Fault {
    let mut ledger = ledger.lock().expect("not poisoned");
    // A first try of any recipient of this mail gets that recipient's fault.
    let mut fault = Fault::None;
    for recipient in recipients {
        let tries = ledger
            .tries
            .entry(recipient.to_ascii_lowercase())
            .or_insert(0);
        *tries += 1;
        if *tries == 1 && fault == Fault::None {
            fault = fault_for(recipient);
        }
    }
    match fault {
        Fault::Refuse451 => ledger.refused += 1,
        Fault::DropAfterStoring => ledger.dropped_after_storing += 1,
        Fault::None => {}
    }
    if fault != Fault::Refuse451 {
        ledger.stored.push(StoredMail {
            recipients: recipients.to_vec(),
            text: readable_body(data),
        });
    }
    fault
}

fn address_in(line: &str) -> String {
    line.split_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .map(|(address, _)| address.to_string())
        .unwrap_or_default()
}

/// The body after the headers, with a quoted-printable transfer encoding undone
/// (lettre picks it for long lines). Other encodings are left as they are.
fn readable_body(data: &str) -> String {
    let (headers, body) = data.split_once("\n\n").unwrap_or(("", data));
    if !headers
        .to_ascii_lowercase()
        .contains("content-transfer-encoding: quoted-printable")
    {
        return body.to_string();
    }
    let mut bytes = Vec::with_capacity(body.len());
    for line in body.split('\n') {
        // A trailing `=` is a soft line break: the line goes on in the next one.
        let (content, soft_break) = match line.strip_suffix('=') {
            Some(content) => (content.as_bytes(), true),
            None => (line.as_bytes(), false),
        };
        let mut i = 0;
        while i < content.len() {
            if content[i] == b'='
                && let Some(byte) = content
                    .get(i + 1..i + 3)
                    .and_then(|hex| std::str::from_utf8(hex).ok())
                    .and_then(|hex| u8::from_str_radix(hex, 16).ok())
            {
                bytes.push(byte);
                i += 3;
                continue;
            }
            bytes.push(content[i]);
            i += 1;
        }
        if !soft_break {
            bytes.push(b'\n');
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
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
