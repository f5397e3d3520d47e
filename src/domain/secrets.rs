//! Secrets StandMeet hands out and later checks: access codes (and the recovery phrase,
//! which has their shape) and link tokens, of which only the hashes are stored; and the
//! signing secrets of webhook endpoints, which StandMeet keeps because it signs with them.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use rand::Rng;
use rand::seq::IndexedRandom;
use sha2::{Digest, Sha256};

/// A new access code: 12 characters without look-alikes, in groups of four
/// (`K7QF-2MZP-9HXA`), about 62 bits.
pub fn new_code() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::rng();
    let chars: Vec<char> = (0..12)
        .map(|_| *ALPHABET.choose(&mut rng).expect("a non-empty alphabet") as char)
        .collect();
    chars
        .chunks(4)
        .map(|group| group.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join("-")
}

/// The stored form of a code: SHA-256 of its letters, upper case, without spaces and
/// dashes, so `k7qf 2mzp 9hxa` matches too. (A random 62-bit code under a rate limit
/// needs no slow hash.)
pub fn code_hash(code: &str) -> String {
    let normal: String = code
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_uppercase())
        .collect();
    let digest = Sha256::digest(normal.as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A link token: 32 random bytes, URL-safe.
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The stored form of a link token (its letters and digits, hashed as a code is).
pub fn token_hash(token: &str) -> String {
    code_hash(token.trim())
}

/// A webhook endpoint's signing secret as the Standard Webhooks specification writes it:
/// `whsec_` and the base64 of the key (32 random bytes for the ones StandMeet makes).
/// Shown to the owner once; kept, because every delivery is signed with it.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret {
    key: Vec<u8>,
}

impl WebhookSecret {
    pub fn generate() -> WebhookSecret {
        let key: [u8; 32] = rand::rng().random();
        WebhookSecret { key: key.to_vec() }
    }

    /// A secret in its written form; `None` unless it is `whsec_` and non-empty base64.
    pub fn parse(text: &str) -> Option<WebhookSecret> {
        let key = BASE64.decode(text.strip_prefix("whsec_")?).ok()?;
        (!key.is_empty()).then_some(WebhookSecret { key })
    }

    /// The written form, `whsec_…`.
    pub fn to_text(&self) -> String {
        format!("whsec_{}", BASE64.encode(&self.key))
    }

    /// The `webhook-signature` header of one delivery attempt: `v1,` and the base64 of
    /// HMAC-SHA256 over `<webhook-id>.<webhook-timestamp>.<body>` with the key.
    pub fn sign(&self, message_id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes a key of any length");
        mac.update(message_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
    }
}

/// Never the key itself: a secret must not reach a log line by accident.
impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_signature_matches_the_standard_webhooks_test_vector() {
        // The specification's published vector: what its libraries verify.
        let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            secret.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_new_webhook_secret_is_32_random_bytes_that_read_back() {
        let secret = WebhookSecret::generate();
        let text = secret.to_text();
        assert!(text.starts_with("whsec_") && text.len() == 6 + 44, "{text}");
        assert_eq!(WebhookSecret::parse(&text), Some(secret.clone()));
        assert_ne!(WebhookSecret::generate(), secret);
        assert_eq!(format!("{secret:?}"), "WebhookSecret(…)");
        for bad in [
            "",
            "whsec_",
            "whsec_!!!",
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        ] {
            assert_eq!(WebhookSecret::parse(bad), None, "{bad:?}");
        }
    }
}
