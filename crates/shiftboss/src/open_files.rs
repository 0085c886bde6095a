//! The process's soft limit on open files, raised to its hard limit at start.
//!
//! With the scheduler's default of up to 2,048 steps in flight, an HTTP agent holds as many
//! connections (one per HTTP/1.1 call), and the API and the store add their own: past the soft
//! limit of 1,024 that many systems still give a process, calls would fail to connect. The hard
//! limit is the operator's to set; the soft one is ours to use up to it.

/// Raises the soft limit to the hard one; returns the limit now in force (`None`: unlimited or
/// unknown). Failing changes nothing: the process runs with what it had.
pub fn raise_to_hard_limit() -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    let (Some(soft), Some(hard)) = (now.current, now.maximum) else { return now.current };
    if soft >= hard {
        return Some(soft);
    }
    match setrlimit(Resource::Nofile, Rlimit { current: Some(hard), maximum: Some(hard) }) {
        Ok(()) => Some(hard),
        Err(e) => {
            tracing::debug!(error = %e, soft, hard, "could not raise the open files limit");
            Some(soft)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let limit = super::raise_to_hard_limit();
        let now = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert_eq!(limit, now.current);
        if let (Some(soft), Some(hard)) = (now.current, now.maximum) {
            assert_eq!(soft, hard);
        }
    }
}
