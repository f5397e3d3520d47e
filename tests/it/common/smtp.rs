//! The SMTP peer on loopback the tests mail to: the one the fault suite uses too
//! (the `standmeet-smtp-peer` crate), which can refuse, hold or cut off mails on request.

#[allow(unused_imports)] // each test binary uses its part
pub use standmeet_smtp_peer::{ReceivedMail, SmtpPeer};
