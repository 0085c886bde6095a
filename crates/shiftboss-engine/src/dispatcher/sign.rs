//! Standard Webhooks signatures: `webhook-signature: v1,<base64 of HMAC-SHA256(key, "id.timestamp.body")>`,
//! the key being the base64 after the secret's `whsec_` prefix.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// A secret that does not decode (the store checks its form at creation, so this is a damaged row).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the subscription's signing secret is not whsec_ and base64")]
pub struct BadSecret;

/// The `webhook-signature` header's value for one attempt.
pub fn signature(secret: &str, msg_id: &str, timestamp: i64, body: &[u8]) -> Result<String, BadSecret> {
    let key = secret.strip_prefix(shiftboss_store::SECRET_PREFIX).ok_or(BadSecret)?;
    let key = STANDARD.decode(key).map_err(|_| BadSecret)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|_| BadSecret)?;
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes())))
}

/// A new signing secret: `whsec_` and 32 random bytes from the operating system, in base64.
pub fn new_secret() -> String {
    format!("{}{}", shiftboss_store::SECRET_PREFIX, STANDARD.encode(shiftboss_core::token::random_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's reference test vectors.
    #[test]
    fn signs_as_the_specification_does() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let sig = signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).unwrap();
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn a_bad_secret_is_an_error_not_a_panic() {
        assert_eq!(signature("nope", "m", 1, b""), Err(BadSecret));
        assert_eq!(signature("whsec_***", "m", 1, b""), Err(BadSecret));
        assert!(shiftboss_store::webhooks::valid_secret(&new_secret()));
    }
}
