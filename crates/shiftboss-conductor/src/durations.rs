//! WAIT durations and dates in Conductor's forms.

/// A WAIT duration in Conductor's units: the core reads the same words at run time.
pub(super) use shiftboss_core::time::parse_duration_words as parse_duration;

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
