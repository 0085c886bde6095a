//! What a replicated store risks on failover (issue 26): whether a commit waits for a standby
//! before the caller hears of it. With asynchronous standbys, a promoted standby may lack the
//! last commits the primary acknowledged: submissions the application was told about, and the
//! steps whose services already acted.

use serde::{Deserialize, Serialize};

/// The store's replication, as its server reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replication {
    /// The server's `synchronous_commit` (PostgreSQL): `on`, `remote_apply` and `remote_write`
    /// wait for a synchronous standby when one is named; `local` and `off` never do.
    pub synchronous_commit: String,
    /// The standbys a commit waits for (`synchronous_standby_names`); empty: none.
    pub synchronous_standby_names: String,
    /// Standbys streaming from this server now.
    pub standbys: u32,
    /// Of those, the ones a commit waits for (`sync` or `quorum`); none when the store's role
    /// cannot read `pg_stat_replication`'s states (they need `pg_monitor`).
    pub synchronous_standbys: u32,
}

impl Replication {
    /// True when a commit is acknowledged only once a standby has it.
    pub fn commits_wait_for_a_standby(&self) -> bool {
        let waits = matches!(self.synchronous_commit.as_str(), "on" | "remote_apply" | "remote_write");
        waits && !self.synchronous_standby_names.trim().is_empty() && self.synchronous_standbys > 0
    }

    /// A warning for the operator, when standbys exist but a commit does not wait for any: a
    /// failover may lose acknowledged work.
    pub fn warning(&self) -> Option<String> {
        if self.standbys == 0 || self.commits_wait_for_a_standby() {
            return None;
        }
        Some(format!(
            "{} standby(s) replicate asynchronously (synchronous_commit={}, synchronous_standby_names={:?}, {} \
             synchronous): a failover to one may lose commits already acknowledged (tasks submitted, replies \
             recorded); set synchronous_standby_names and synchronous_commit=on, see the README",
            self.standbys, self.synchronous_commit, self.synchronous_standby_names, self.synchronous_standbys
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(commit: &str, names: &str, standbys: u32, sync: u32) -> Replication {
        Replication {
            synchronous_commit: commit.into(),
            synchronous_standby_names: names.into(),
            standbys,
            synchronous_standbys: sync,
        }
    }

    #[test]
    fn asynchronous_standbys_are_warned_of() {
        assert_eq!(r("on", "", 0, 0).warning(), None, "no standby: nothing to lose to a failover");
        assert!(r("on", "", 1, 0).warning().is_some());
        assert!(r("local", "s1", 1, 1).warning().is_some(), "local commits do not wait");
        assert!(r("on", "s1", 2, 0).warning().is_some(), "named, but none streaming synchronously");
        assert_eq!(r("on", "s1", 2, 1).warning(), None);
        assert!(r("remote_apply", "FIRST 1 (s1)", 1, 1).commits_wait_for_a_standby());
    }
}
