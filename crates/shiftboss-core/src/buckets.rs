//! Load-balance buckets (M3): every task (and its steps) carries a number in `0..BUCKETS`; each
//! scheduler claims only the buckets it owns, either a list it was given or its share among the
//! live schedulers, weighted by each one's power.
//!
//! Buckets spread work; they are not what keeps a step to one scheduler (the claim's lease is).
//! So two schedulers briefly owning one bucket while the live set changes is harmless.

/// How many buckets there are.
pub const BUCKETS: u16 = 256;

/// The bucket of a task key: FNV-1a, stable across processes, versions and platforms (the
/// standard library's hasher is randomised per process).
pub fn bucket_of(key: &str) -> u16 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % u64::from(BUCKETS)) as u16
}

/// A live scheduler and its weight (its share of the machine power; at least 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The scheduler's instance id; shares are laid out in the order of these ids.
    pub instance: String,
    /// Its share of the machine power; 0 counts as 1.
    pub weight: u32,
}

/// The buckets `me` owns among `live`: contiguous ranges in instance-id order, sized by weight, so
/// that every live scheduler computes the same split without talking to the others. Every bucket
/// has exactly one owner. `me` missing from `live` (its heartbeat not yet seen) owns nothing.
pub fn share(live: &[Member], me: &str) -> Vec<u16> {
    let mut members: Vec<&Member> = live.iter().collect();
    members.sort_by(|a, b| a.instance.cmp(&b.instance));
    members.dedup_by(|a, b| a.instance == b.instance);
    let total: u64 = members.iter().map(|m| u64::from(m.weight.max(1))).sum();
    let mut start = 0u64;
    for m in members {
        let end = start + u64::from(m.weight.max(1));
        if m.instance == me {
            let lo = start * u64::from(BUCKETS) / total;
            let hi = end * u64::from(BUCKETS) / total;
            return (lo as u16..hi as u16).collect();
        }
        start = end;
    }
    Vec::new()
}

/// Reads a bucket list such as `0-63,128,200-255`.
pub fn parse_list(s: &str) -> Result<Vec<u16>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let num = |t: &str| -> Result<u16, String> {
            let n: u16 = t.parse().map_err(|_| format!("{t:?} is not a bucket number"))?;
            if n >= BUCKETS {
                return Err(format!("bucket {n} is out of range 0-{}", BUCKETS - 1));
            }
            Ok(n)
        };
        let (lo, hi) = (num(lo)?, num(hi)?);
        if lo > hi {
            return Err(format!("{part:?}: the range runs backwards"));
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        return Err("no buckets named".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(i: &str, w: u32) -> Member {
        Member { instance: i.into(), weight: w }
    }

    #[test]
    fn keys_hash_stably_and_spread() {
        assert_eq!(bucket_of("order-1"), bucket_of("order-1"));
        // Fixed values: a change of hash would move every task to another scheduler.
        assert_eq!(bucket_of(""), (0xcbf2_9ce4_8422_2325u64 % 256) as u16);
        let used: std::collections::HashSet<u16> = (0..2000).map(|i| bucket_of(&format!("order-{i}"))).collect();
        assert!(used.len() > 240, "{} buckets used", used.len());
    }

    #[test]
    fn weights_size_the_shares() {
        let live = [m("a", 1), m("b", 3)];
        assert_eq!(share(&live, "a"), (0..64).collect::<Vec<_>>());
        assert_eq!(share(&live, "b"), (64..256).collect::<Vec<_>>());
        assert_eq!(share(&live, "c"), Vec::<u16>::new());
        assert_eq!(share(&[m("solo", 0)], "solo").len(), 256, "weight 0 counts as 1");
    }

    #[test]
    fn lists_parse() {
        assert_eq!(parse_list("0-2, 5,4").unwrap(), vec![0, 1, 2, 4, 5]);
        assert!(parse_list("256").is_err());
        assert!(parse_list("9-3").is_err());
        assert!(parse_list("x").is_err());
        assert!(parse_list("").is_err());
    }

    proptest! {
        /// Whatever the live set, every bucket has exactly one owner.
        #[test]
        fn every_bucket_has_one_owner(weights in proptest::collection::vec(0u32..10, 1..12)) {
            let live: Vec<Member> = weights.iter().enumerate().map(|(i, w)| m(&format!("s{i:02}"), *w)).collect();
            let mut owners = vec![0u32; BUCKETS as usize];
            for member in &live {
                for b in share(&live, &member.instance) {
                    owners[b as usize] += 1;
                }
            }
            prop_assert!(owners.iter().all(|&n| n == 1));
        }
    }
}
