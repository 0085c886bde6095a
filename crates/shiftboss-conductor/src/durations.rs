//! WAIT durations and dates in Conductor's forms.

use std::time::Duration;

/// A WAIT duration in Conductor's units: `10s`, `2 minutes`, `1d 2h`, `1 days 30 mins`.
pub(super) fn parse_duration(text: &str) -> Result<Duration, String> {
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

/// A Conductor `until` (`yyyy-MM-dd HH:mm z`, `yyyy-MM-dd HH:mm`, `yyyy-MM-dd`, or RFC 3339) as
/// RFC 3339 text. Times without a zone are read as UTC; only UTC, GMT and Z zones are known.
pub(super) fn parse_until(text: &str) -> Result<String, String> {
    let t = text.trim();
    if humantime::parse_rfc3339_weak(t).is_ok() && (t.ends_with('Z') || t.ends_with('z')) {
        return Ok(t.to_owned());
    }
    let bad = |why: &str| format!("{text:?}: {why}");
    let (rest, zone) = match t.rsplit_once(' ') {
        Some((r, z)) if z.chars().all(|c| c.is_ascii_alphabetic()) => (r, Some(z)),
        _ => (t, None),
    };
    if let Some(z) = zone
        && !matches!(z, "UTC" | "GMT" | "Z")
    {
        return Err(bad("only UTC times are understood: write it in UTC or as RFC 3339 with Z"));
    }
    let (date, time) = match rest.split_once([' ', 'T']) {
        Some((d, tm)) => (d, tm),
        None => (rest, "00:00"),
    };
    let time = match time.len() {
        5 => format!("{time}:00"),
        8 => time.to_owned(),
        _ => return Err(bad("not a time as yyyy-MM-dd HH:mm")),
    };
    let out = format!("{date}T{time}Z");
    humantime::parse_rfc3339(&out).map_err(|_| bad("not a date as yyyy-MM-dd HH:mm z"))?;
    Ok(out)
}
