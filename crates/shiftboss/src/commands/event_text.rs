//! An event's detail as the text commands print it: the stored JSON, with the times in it (kept
//! as epoch milliseconds, like every time in the store) shown in RFC 3339 like every other time
//! the commands print. `--json` output keeps the stored numbers.

use serde_json::Value;
use shiftboss_core::Timestamp;

/// The detail keys whose numbers are times: a claim's `complete_by`, a job's `due_at`, a lapsed
/// step's `retry_at`.
const TIME_KEYS: [&str; 3] = ["complete_by", "due_at", "retry_at"];

/// The detail, compact, with its times in RFC 3339.
pub fn detail(detail: &Value) -> String {
    let Value::Object(fields) = detail else { return detail.to_string() };
    let mut shown = fields.clone();
    for key in TIME_KEYS {
        if let Some(v) = shown.get_mut(key)
            && let Some(ms) = v.as_i64()
        {
            *v = Value::String(Timestamp(ms).to_string());
        }
    }
    Value::Object(shown).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_in_a_detail_read_as_rfc3339() {
        let d = json!({"attempt": 1, "complete_by": 1_795_600_213_842_i64, "lease_token": 7});
        assert_eq!(detail(&d), r#"{"attempt":1,"complete_by":"2026-11-25T09:50:13.842Z","lease_token":7}"#);
        assert_eq!(detail(&json!({"retry_at": null})), r#"{"retry_at":null}"#);
        assert_eq!(detail(&json!("text")), r#""text""#);
    }
}
