//! How StandMeet speaks SMTP to a real peer on loopback (which offers AUTH PLAIN but no
//! TLS): a password in the URL is read as written (`+` stays `+`, `%2B` is `+`), it is
//! never sent without TLS over `smtp://`, and `smtp+insecure://` sends it in the clear
//! because the operator said so.

use crate::common;

use common::smtp::SmtpPeer;
use standmeet::config::{MailFrom, MailSupplier};
use standmeet::domain::mail::{Mail, Mailer};
use standmeet::types::EmailAddress;

fn mailer(url: &str) -> Mailer {
    Mailer::from_supplier(&MailSupplier::Smtp(url.parse().unwrap())).expect("a mailer")
}

fn mail() -> Mail {
    Mail {
        to: EmailAddress::parse("ada@example.com").unwrap(),
        subject: "Hello".into(),
        body: "A test mail.".into(),
        calendar: None,
    }
}

fn sender() -> MailFrom {
    MailFrom {
        name: "Front desk".into(),
        address: EmailAddress::parse("standmeet@desk.example").unwrap(),
    }
}

#[tokio::test]
async fn smtp_insecure_signs_in_with_the_password_as_written() {
    let peer = SmtpPeer::start().await.expect("an SMTP peer on loopback");
    let url = format!(
        "smtp+insecure://mail%40desk.example:pa+ss%2Bw%20rd@127.0.0.1:{}",
        peer.port
    );
    mailer(&url)
        .send(&sender(), &mail())
        .await
        .expect("the mail goes out");
    assert_eq!(
        peer.logins(),
        [("mail@desk.example".to_string(), "pa+ss+w rd".to_string())]
    );
    assert_eq!(peer.mails_to("ada@example.com").len(), 1);
}

#[tokio::test]
async fn smtp_with_a_password_needs_starttls_and_sends_nothing_without_it() {
    let peer = SmtpPeer::start().await.expect("an SMTP peer on loopback");
    let url = format!("smtp://user:secret@127.0.0.1:{}", peer.port);
    let sent = mailer(&url).send(&sender(), &mail()).await;
    assert!(sent.is_err(), "no STARTTLS, no send");
    assert!(peer.logins().is_empty(), "the password never went out");
    assert!(peer.received().is_empty());
}

#[tokio::test]
async fn smtp_without_a_password_works_in_plain_text_as_before() {
    let peer = SmtpPeer::start().await.expect("an SMTP peer on loopback");
    mailer(&peer.url())
        .send(&sender(), &mail())
        .await
        .expect("the mail goes out");
    assert!(peer.logins().is_empty());
    assert_eq!(peer.received().len(), 1);
}

#[tokio::test]
async fn a_mail_carries_a_message_id_in_the_senders_domain_and_the_senders_name() {
    let peer = SmtpPeer::start().await.expect("an SMTP peer on loopback");
    let mailer = mailer(&peer.url());
    for _ in 0..2 {
        mailer
            .send(&sender(), &mail())
            .await
            .expect("the mail goes out");
    }
    let received = peer.received();
    let header = |data: &str, name: &str| {
        data.lines()
            .find_map(|line| line.strip_prefix(name))
            .map(|value| value.trim().to_string())
            .unwrap_or_else(|| panic!("no {name} header in {data}"))
    };
    let ids: Vec<String> = received
        .iter()
        .map(|mail| header(&mail.data, "Message-ID:"))
        .collect();
    for id in &ids {
        assert!(
            id.starts_with('<') && id.ends_with("@desk.example>"),
            "{id}"
        );
    }
    assert_ne!(ids[0], ids[1], "each mail its own");
    assert_eq!(
        header(&received[0].data, "From:"),
        "\"Front desk\" <standmeet@desk.example>"
    );
}
