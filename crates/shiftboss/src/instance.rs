//! Which instance id a `serve` process runs under, and its hold on that id on this host.
//!
//! A scheduler returns the steps its instance id held to Pending when it starts (a restarted
//! process takes back what it held), so two live processes on one store must never share an id:
//! each would release the other's claims, and the fence would then refuse the other's replies.
//!
//! Each serve process holds its (store, instance id) pair for as long as it lives, as a Linux
//! abstract Unix socket bound under a name made from the pair. Binding fails while another live
//! process holds it, and the kernel frees the name when its holder dies, however it dies: a
//! process killed with SIGKILL is restarted under its id at once. It costs the store nothing (a
//! row in the store would stay live for its time to live after a crash, and refuse the restart).
//! It sees only this host's processes (and those in its network namespace), which is where the
//! default id collides; ids given across hosts must differ by configuration.
//!
//! The default id is the host name. When another process on this host already serves the store
//! under it, the next free one of `HOST-2`, `HOST-3`, ... is taken: unique per process, and
//! stable across restarts as long as processes restart into the slot they left (a process that
//! takes another's former slot releases only claims of a process that is gone). An id given by
//! `--instance-id`, `SHIFTBOSS_INSTANCE_ID` or the config file is never changed: a second process
//! under it is refused.

use crate::target::{DbTarget, split_schema};
use anyhow::bail;
use shiftboss_core::InstanceId;
use std::path::Path;

/// The most default ids tried (`HOST`, `HOST-2`, ... `HOST-64`) before giving up.
const DEFAULT_SLOTS: u32 = 64;

/// This process's hold on its instance id for one store; the id is free again when it is dropped
/// (or the process ends).
pub struct InstanceHold {
    pub id: InstanceId,
    /// Set when the default id was taken and another slot was chosen: why.
    pub note: Option<String>,
    #[cfg(target_os = "linux")]
    _socket: std::os::unix::net::UnixListener,
}

/// Takes `given` (from a flag, the environment or the config file) or a default id for `db`.
pub fn hold(db: &DbTarget, given: Option<String>) -> anyhow::Result<InstanceHold> {
    let store = store_identity(db);
    if let Some(id) = given {
        let id = InstanceId::new(id)?;
        return match try_hold(&store, &id)? {
            Some(h) => Ok(h),
            None => bail!(
                "instance id {id} is in use by another serve process on this host for {db}: each process needs an \
                 id of its own that it keeps across restarts (set --instance-id, SHIFTBOSS_INSTANCE_ID or \
                 instance_id in the config file)"
            ),
        };
    }
    let host = host_name();
    for slot in 1..=DEFAULT_SLOTS {
        let id = if slot == 1 { host.clone() } else { format!("{host}-{slot}") };
        let id = InstanceId::new(id)?;
        if let Some(mut h) = try_hold(&store, &id)? {
            if slot > 1 {
                h.note = Some(format!(
                    "instance id {host} is in use by another serve process on this host for this store, so this one \
                     runs as {id}; to choose, set --instance-id, SHIFTBOSS_INSTANCE_ID or instance_id in the config file"
                ));
            }
            return Ok(h);
        }
    }
    bail!(
        "instance ids {host} to {host}-{DEFAULT_SLOTS} are all in use by serve processes on this host for {db}: set \
         --instance-id, SHIFTBOSS_INSTANCE_ID or instance_id in the config file"
    )
}

/// The host name, which is stable across restarts.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .filter(|s| InstanceId::new(s.clone()).is_ok() && s.len() <= 120)
        .unwrap_or_else(|| "shiftboss".into())
}

/// What names one store whatever the spelling of `--db`: the SQLite file's canonical path, or
/// PostgreSQL's hosts, ports, database and schema (not the user, password or other parameters,
/// such as `application_name`, that two processes on one store may set differently).
fn store_identity(db: &DbTarget) -> String {
    match db {
        DbTarget::Sqlite(path) => {
            let p = std::fs::canonicalize(path).unwrap_or_else(|_| absolute(path));
            format!("sqlite:{}", p.display())
        }
        DbTarget::Postgres(url) => {
            let Ok((rest, schema)) = split_schema(url) else { return format!("postgres:{url}") };
            match rest.parse::<tokio_postgres::Config>() {
                Ok(c) => format!(
                    "postgres:{:?}:{:?}:{}:{schema}",
                    c.get_hosts(),
                    c.get_ports(),
                    c.get_dbname().or(c.get_user()).unwrap_or("")
                ),
                Err(_) => format!("postgres:{rest}:{schema}"),
            }
        }
    }
}

fn absolute(path: &Path) -> std::path::PathBuf {
    std::env::current_dir().map_or_else(|_| path.to_owned(), |d| d.join(path))
}

/// FNV-1a, 64 bits: stable across builds and runs (std's hasher promises neither), and the name
/// must be the same in every process.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// The abstract socket's name for (store, id): hashed, as a name holds at most 107 bytes and
/// should not show the store's address to every user of the host.
fn socket_name(store: &str, id: &InstanceId) -> String {
    let key = format!("{store}\0{id}");
    // Two different hashes of the key, so that 128 bits tell pairs apart.
    let salted = format!("shiftboss\0{key}");
    format!("shiftboss-serve/{:016x}{:016x}", fnv1a(key.as_bytes()), fnv1a(salted.as_bytes()))
}

/// Ok(None) when another live process holds the id for this store.
#[cfg(target_os = "linux")]
fn try_hold(store: &str, id: &InstanceId) -> anyhow::Result<Option<InstanceHold>> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let addr = SocketAddr::from_abstract_name(socket_name(store, id))?;
    match UnixListener::bind_addr(&addr) {
        Ok(socket) => Ok(Some(InstanceHold { id: id.clone(), note: None, _socket: socket })),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Ok(None),
        Err(e) => Err(anyhow::Error::new(e).context(format!("holding instance id {id} on this host"))),
    }
}

/// Elsewhere nothing is checked: the id is taken as it is.
#[cfg(not(target_os = "linux"))]
fn try_hold(_store: &str, id: &InstanceId) -> anyhow::Result<Option<InstanceHold>> {
    let _ = socket_name;
    Ok(Some(InstanceHold { id: id.clone(), note: None }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_store_is_named_alike_however_it_is_spelled() {
        let a = DbTarget::parse("postgres://u:p@127.0.0.1:5432/test?schema=x&application_name=a").unwrap();
        let b = DbTarget::parse("postgres://v@127.0.0.1:5432/test?application_name=b&schema=x").unwrap();
        let c = DbTarget::parse("postgres://u:p@127.0.0.1:5432/test?schema=y").unwrap();
        assert_eq!(store_identity(&a), store_identity(&b));
        assert_ne!(store_identity(&a), store_identity(&c));
        assert!(!store_identity(&a).contains(":p@"), "no password in {}", store_identity(&a));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.db"), "").unwrap();
        let direct = DbTarget::Sqlite(dir.path().join("s.db"));
        let roundabout = DbTarget::Sqlite(dir.path().join(".").join("s.db"));
        assert_eq!(store_identity(&direct), store_identity(&roundabout));
    }

    #[test]
    fn an_id_is_held_once_per_store_until_its_holder_lets_go() {
        let id = InstanceId::new(format!("unit-{}", std::process::id())).unwrap();
        let first = try_hold("store-a", &id).unwrap().expect("free");
        assert!(try_hold("store-a", &id).unwrap().is_none(), "held twice");
        let other_store = try_hold("store-b", &id).unwrap();
        assert!(other_store.is_some(), "another store's id is apart");
        drop(first);
        assert!(try_hold("store-a", &id).unwrap().is_some(), "free again once dropped");
    }

    #[test]
    fn socket_names_fit() {
        let id = InstanceId::new("x".repeat(128)).unwrap();
        assert!(socket_name(&"s".repeat(5000), &id).len() <= 107);
    }
}
