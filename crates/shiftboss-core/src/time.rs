//! Time as the state store keeps it: whole milliseconds since the Unix epoch.
//!
//! Milliseconds in a plain integer column compare and index the same way in SQLite and
//! PostgreSQL, and keep lease arithmetic exact.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time, in milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn from_system(t: SystemTime) -> Self {
        let ms = t.duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        Timestamp(i64::try_from(ms).unwrap_or(i64::MAX))
    }

    pub fn to_system(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.0.max(0) as u64)
    }

    /// This time plus a duration, saturating instead of overflowing.
    pub fn plus(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_add(duration_ms(d)))
    }

    /// How long from `earlier` to `self`; zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0).max(0) as u64)
    }
}

/// The last millisecond RFC 3339 can write (9999-12-31T23:59:59.999Z). Later times (a step due
/// "never" is stored as the largest timestamp) are written as this one: a formatter that failed
/// would make `to_string` panic.
pub const LAST_WRITABLE: Timestamp = Timestamp(253_402_300_799_999);

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = if *self > LAST_WRITABLE { LAST_WRITABLE } else { *self };
        write!(f, "{}", humantime::format_rfc3339_millis(t.to_system()))
    }
}

/// A duration in whole milliseconds, saturating at `i64::MAX`.
pub fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Serde for durations in definitions: a number of milliseconds, or a string such as "30s" or "1m 30s".
/// A duration in words, as Conductor's WAIT writes it and a wait's `duration_from` may give it:
/// `10s`, `2 minutes`, `1d 2h`, `1 days 30 mins` (days, hours, minutes, seconds).
pub fn parse_duration_words(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration such as \"10s\", \"2 minutes\" or \"1d 2h\"");
    let mut total: u64 = 0;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = rest[digits..].trim_start();
        let letters = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let unit = match &rest[..letters] {
            "d" | "day" | "days" => 86_400,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600,
            "m" | "min" | "mins" | "minute" | "minutes" => 60,
            "s" | "sec" | "secs" | "second" | "seconds" => 1,
            _ => return Err(bad()),
        };
        total = n.checked_mul(unit).and_then(|s| total.checked_add(s)).ok_or_else(bad)?;
        rest = rest[letters..].trim_start_matches([' ', ',']);
    }
    Ok(Duration::from_secs(total))
}

pub mod serde_duration {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Millis(u64),
        Text(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        match Raw::deserialize(d)? {
            Raw::Millis(ms) => Ok(Duration::from_millis(ms)),
            Raw::Text(s) => {
                humantime::parse_duration(&s).map_err(|e| D::Error::custom(format!("invalid duration {s:?}: {e}")))
            }
        }
    }

    /// The same for `Option<Duration>`.
    pub mod option {
        use serde::{Deserialize, Deserializer, Serializer};
        use std::time::Duration;

        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => super::serialize(d, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            #[derive(Deserialize)]
            struct Wrap(#[serde(with = "super")] Duration);
            Ok(Option::<Wrap>::deserialize(d)?.map(|w| w.0))
        }
    }

    /// The same for a list of durations.
    pub mod vec {
        use serde::{Deserialize, Deserializer, Serializer, ser::SerializeSeq};
        use std::time::Duration;

        pub fn serialize<S: Serializer>(v: &[Duration], s: S) -> Result<S::Ok, S::Error> {
            let mut seq = s.serialize_seq(Some(v.len()))?;
            for d in v {
                seq.serialize_element(&humantime::format_duration(*d).to_string())?;
            }
            seq.end()
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Duration>, D::Error> {
            #[derive(Deserialize)]
            struct Wrap(#[serde(with = "super")] Duration);
            Ok(Vec::<Wrap>::deserialize(d)?.into_iter().map(|w| w.0).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plus_saturates_and_since_never_goes_negative() {
        assert_eq!(Timestamp(i64::MAX - 1).plus(Duration::from_secs(1)), Timestamp(i64::MAX));
        assert_eq!(Timestamp(5).since(Timestamp(10)), Duration::ZERO);
        assert_eq!(Timestamp(i64::MAX).to_string(), "9999-12-31T23:59:59.999Z", "far times are written, not a panic");
        assert_eq!(Timestamp(-5).to_string(), "1970-01-01T00:00:00.000Z");
        assert_eq!(Timestamp(1500).since(Timestamp(500)), Duration::from_secs(1));
    }

    #[test]
    fn durations_parse_from_numbers_and_text() {
        #[derive(serde::Deserialize)]
        struct D(#[serde(with = "serde_duration")] Duration);
        let a: D = serde_json::from_str("250").unwrap();
        assert_eq!(a.0, Duration::from_millis(250));
        let b: D = serde_json::from_str("\"1m 30s\"").unwrap();
        assert_eq!(b.0, Duration::from_secs(90));
        assert!(serde_json::from_str::<D>("\"soon\"").is_err());
        assert!(serde_json::from_str::<D>("-5").is_err());
    }
}
