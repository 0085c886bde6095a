//! The idempotency key a step sends to its service on every attempt (P4), made from what
//! identifies the work rather than drawn at random (issue 26): the task's key, the step's
//! instance name (which carries the loop passes, `charge#2`) and the task's generation (bumped
//! by an operator action that runs steps again from scratch: a rerun, or a retry that starts a
//! sub-workflow's child again). So a step whose row was lost (a standby promoted without the
//! last commits, the task submitted again under its key) calls its service with the key it used
//! before, and the service applies nothing twice; a rerun is new work, with new keys.

use sha2::{Digest, Sha256};

/// The key of the step `instance` of the task with key `task_key`, at `generation`: a UUID
/// (version 8, the variant of RFC 9562) from the SHA-256 of the three, so that a service sees
/// the usual form and no task key, which may say more than a service should know.
pub fn step_key(task_key: &str, instance: &str, generation: i64) -> String {
    let mut h = Sha256::new();
    // Each part behind its length: ("a/b", "c") and ("a", "b/c") must not meet.
    for part in [task_key.as_bytes(), instance.as_bytes()] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.update(generation.to_be_bytes());
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_work_gets_the_same_key_and_other_work_another() {
        let k = step_key("order-1", "charge", 0);
        assert_eq!(k, step_key("order-1", "charge", 0));
        assert_eq!(k.len(), 36);
        assert_eq!(&k[14..15], "8", "version 8: {k}");
        assert!(matches!(&k[19..20], "8" | "9" | "a" | "b"), "RFC 9562 variant: {k}");
        let others = [
            step_key("order-2", "charge", 0),
            step_key("order-1", "charge#2", 0),
            step_key("order-1", "charge", 1),
            step_key("order-1/charge", "", 0),
            step_key("order-", "1charge", 0),
        ];
        for o in &others {
            assert_ne!(&k, o);
        }
        assert_ne!(others[3], step_key("order-1", "/charge", 0));
    }
}
