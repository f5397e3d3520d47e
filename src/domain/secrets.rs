//! Secrets StandMeet hands out and later checks: access codes (and the recovery phrase,
//! which has their shape) and link tokens. Only their hashes are stored.

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
