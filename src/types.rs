//! Parsed newtypes: input is turned into these at the edge, and everything inside takes
//! the parsed type, so nothing deeper has to wonder whether a value was checked.

use std::fmt;

/// What is wrong with a person's name as typed (after trimming), in words for them;
/// `None` when it will do. Names are one line of at most 200 characters.
pub fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("Please give your name.".into())
    } else if name.chars().count() > 200 {
        Some("A name can be at most 200 characters long.".into())
    } else if name.chars().any(char::is_control) {
        Some("A name cannot contain control characters such as tabs or NUL.".into())
    } else {
        None
    }
}

/// What is wrong with a free text such as a message (after trimming): at most `max`
/// characters, line breaks and tabs allowed but no other control character. `what`
/// names it as a sentence begins ("A message").
pub fn free_text_problem(text: &str, max: usize, what: &str) -> Option<String> {
    if text.chars().count() > max {
        let max = if max >= 1000 {
            format!("{},{:03}", max / 1000, max % 1000)
        } else {
            max.to_string()
        };
        Some(format!("{what} can be at most {max} characters long."))
    } else if text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        Some(format!(
            "{what} cannot contain control characters such as NUL (line breaks are fine)."
        ))
    } else {
        None
    }
}

/// A free text's line breaks as one kind, `\n`: a `\r\n` and a bare `\r` alike. Done
/// where the text comes in, so that nothing downstream (a calendar object, whose
/// library folds only `\n`; a mail) meets a bare carriage return it would pass on.
pub fn normalized_line_breaks(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// An email address that has the shape of one: a local part, one `@`, a domain.
///
/// The domain is kept in lower case (domains are case-insensitive); the local part is
/// kept as written, because some mail servers do treat it case-sensitively.
#[derive(Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EmailAddress(String);

/// Why a text is not an email address, in words for the person who typed it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmailAddressError {
    #[error("an email address is required")]
    Empty,
    #[error("an email address has one @ between a name and a domain, as in ada@example.com")]
    Shape,
    #[error("an email address can be at most 254 characters long")]
    TooLong,
    #[error("the part before the @ is not valid in an email address")]
    LocalPart,
    #[error("the part after the @ is not a valid domain")]
    Domain,
    #[error("this address cannot be mailed to; check it for unusual characters")]
    Undeliverable,
}

impl EmailAddress {
    /// Parses `raw` (surrounding spaces are ignored).
    pub fn parse(raw: &str) -> Result<Self, EmailAddressError> {
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return Err(EmailAddressError::Empty);
        }
        if trimmed.chars().count() > 254 {
            return Err(EmailAddressError::TooLong);
        }
        let (local, domain) = trimmed.split_once('@').ok_or(EmailAddressError::Shape)?;
        if local.is_empty() || domain.is_empty() || domain.contains('@') {
            return Err(EmailAddressError::Shape);
        }
        if !is_valid_local_part(local) {
            return Err(EmailAddressError::LocalPart);
        }
        let domain = domain.to_lowercase();
        if !is_valid_domain(&domain) {
            return Err(EmailAddressError::Domain);
        }
        // The mailer's own parser must take it too, so that an address accepted here
        // can always be sent to (it is lettre's `Address` that a mail is built with).
        if lettre::Address::new(local, &domain).is_err() {
            return Err(EmailAddressError::Undeliverable);
        }
        Ok(EmailAddress(format!("{local}@{domain}")))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The dot-atom form of RFC 5322: letters, digits and a few symbols, with single dots
/// between them. Quoted local parts are legal but so rare that refusing them helps more
/// people (who mistyped) than it hurts.
fn is_valid_local_part(local: &str) -> bool {
    const SYMBOLS: &str = "!#$%&'*+-/=?^_`{|}~";
    local.chars().count() <= 64
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local
            .chars()
            .all(|c| c == '.' || c.is_alphanumeric() || SYMBOLS.contains(c))
}

/// Dot-separated labels of letters, digits and inner hyphens, each at most 63 long.
/// A single label (`localhost`, an intranet host) is allowed.
fn is_valid_domain(domain: &str) -> bool {
    domain.len() <= 253
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.chars().count() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c == '-' || c.is_alphanumeric())
        })
}

impl fmt::Display for EmailAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for EmailAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EmailAddress({})", self.0)
    }
}

impl TryFrom<String> for EmailAddress {
    type Error = EmailAddressError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        EmailAddress::parse(&value)
    }
}

impl From<EmailAddress> for String {
    fn from(value: EmailAddress) -> Self {
        value.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_break_comes_in_as_a_line_feed() {
        assert_eq!(
            normalized_line_breaks("one\rINJECTED:yes\r\ntwo\nthree\r"),
            "one\nINJECTED:yes\ntwo\nthree\n"
        );
        let booking = crate::domain::bookings::NewBooking::parse(
            "2030-01-07T09:00:00Z",
            "Eve",
            "eve@example.com",
            "Line one\rINJECTED:yes",
        )
        .unwrap();
        assert_eq!(booking.topic, "Line one\nINJECTED:yes");
    }

    #[test]
    fn ordinary_addresses_parse_and_keep_the_local_case() {
        assert_eq!(
            EmailAddress::parse(" Ada.Lovelace+desk@Example.COM ")
                .unwrap()
                .as_str(),
            "Ada.Lovelace+desk@example.com"
        );
        assert_eq!(
            EmailAddress::parse("admin@localhost").unwrap().as_str(),
            "admin@localhost"
        );
        assert_eq!(
            EmailAddress::parse("東京@例え.jp").unwrap().as_str(),
            "東京@例え.jp"
        );
    }

    #[test]
    fn every_address_accepted_can_be_built_into_a_mail() {
        for candidate in [
            "ada@example.com",
            "東京@例え.jp",
            "ünïcödé@bücher.example",
            "a@١٢٣.example",
            "a@ａｂｃ.example",
            "o'reilly+tag@example.co.uk",
            "a@xn--bcher-kva.example",
            "a@ß.example",
            "ǅ@example.com",
            "a@exa_mple.com",
            "user@[192.0.2.1]",
            "a@localhost",
            "a@123.123.123.123",
        ] {
            if let Ok(address) = EmailAddress::parse(candidate) {
                let mailbox: Result<lettre::message::Mailbox, _> = address.as_str().parse();
                assert!(
                    mailbox.is_ok(),
                    "{candidate} was accepted but cannot be mailed"
                );
            }
        }
    }

    #[test]
    fn malformed_addresses_are_refused_with_the_reason() {
        assert_eq!(EmailAddress::parse("   "), Err(EmailAddressError::Empty));
        assert_eq!(EmailAddress::parse("ada"), Err(EmailAddressError::Shape));
        assert_eq!(EmailAddress::parse("a@@b"), Err(EmailAddressError::Shape));
        assert_eq!(
            EmailAddress::parse("@b.example"),
            Err(EmailAddressError::Shape)
        );
        assert_eq!(
            EmailAddress::parse("a b@c.example"),
            Err(EmailAddressError::LocalPart)
        );
        assert_eq!(
            EmailAddress::parse("a..b@c.example"),
            Err(EmailAddressError::LocalPart)
        );
        assert_eq!(
            EmailAddress::parse("a@-c.example"),
            Err(EmailAddressError::Domain)
        );
        assert_eq!(
            EmailAddress::parse("a@c..example"),
            Err(EmailAddressError::Domain)
        );
        assert_eq!(
            EmailAddress::parse("a@c.example "),
            Ok(EmailAddress("a@c.example".into()))
        );
        let long = format!("{}@example.com", "a".repeat(250));
        assert_eq!(EmailAddress::parse(&long), Err(EmailAddressError::TooLong));
    }

    #[test]
    fn serde_goes_through_parse() {
        let parsed: EmailAddress = serde_json::from_str("\"x@Y.example\"").unwrap();
        assert_eq!(parsed.as_str(), "x@y.example");
        assert!(serde_json::from_str::<EmailAddress>("\"nope\"").is_err());
    }
}
