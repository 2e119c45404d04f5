//! Running a closure inside a named network namespace without moving the
//! calling thread.
//!
//! `setns(2)` changes the namespace of the calling *thread* only, so each
//! call here spawns a short-lived scoped thread, moves that thread into the
//! namespace and runs the closure there. Sockets created by the closure stay
//! bound to that namespace for their whole life and may be returned and used
//! from any thread; files under `/proc/sys/net` opened there reflect that
//! namespace.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where `ip netns add NAME` bind-mounts named namespaces.
pub const NETNS_RUN_DIR: &str = "/run/netns";

/// `/run/netns/NAME`, after checking that NAME is a plain file name.
pub fn netns_path(name: &str) -> io::Result<PathBuf> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid network namespace name {name:?}"),
        ));
    }
    Ok(Path::new(NETNS_RUN_DIR).join(name))
}

/// Open a network namespace file, with an error that names it.
pub(crate) fn open_netns(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "namespace path contains NUL"))?;
    // SAFETY: c is a valid NUL-terminated string.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        let msg = match e.raw_os_error() {
            Some(libc::ENOENT) => format!("network namespace {} does not exist", path.display()),
            Some(libc::EACCES) | Some(libc::EPERM) => {
                format!(
                    "cannot open network namespace {}: {e} (needs root)",
                    path.display()
                )
            }
            _ => format!("cannot open network namespace {}: {e}", path.display()),
        };
        return Err(io::Error::new(e.kind(), msg));
    }
    // SAFETY: fd is a freshly opened descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Move the calling thread into the network namespace behind `fd`.
pub(crate) fn setns_net(fd: &OwnedFd, path: &Path) -> io::Result<()> {
    // SAFETY: plain syscall on a valid descriptor.
    let r = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        let e = io::Error::last_os_error();
        let msg = match e.raw_os_error() {
            Some(libc::EPERM) => format!(
                "setns(CLONE_NEWNET) into {} not permitted: needs CAP_SYS_ADMIN (run as root)",
                path.display()
            ),
            Some(libc::EINVAL) => format!("{} is not a network namespace", path.display()),
            _ => format!("setns(CLONE_NEWNET) into {} failed: {e}", path.display()),
        };
        return Err(io::Error::new(e.kind(), msg));
    }
    Ok(())
}

/// Run `f` on a helper thread that has joined the network namespace at
/// `path` (e.g. `/run/netns/NAME` or `/proc/PID/ns/net`). The caller's own
/// namespace is untouched. A panic in `f` is propagated.
pub fn run_in_netns_path<T, F>(path: &Path, f: F) -> io::Result<T>
where
    T: Send,
    F: FnOnce() -> io::Result<T> + Send,
{
    let fd = open_netns(path)?;
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name("tcpwhy-netns".into())
            .spawn_scoped(s, move || {
                setns_net(&fd, path)?;
                drop(fd);
                f()
            })?;
        match h.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    })
}

/// [`run_in_netns_path`] for the named namespace `/run/netns/NAME`.
pub fn run_in_netns<T, F>(name: &str, f: F) -> io::Result<T>
where
    T: Send,
    F: FnOnce() -> io::Result<T> + Send,
{
    let path = netns_path(name)?;
    run_in_netns_path(&path, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_rejected() {
        for n in ["", ".", "..", "a/b", "a\0b"] {
            assert_eq!(
                netns_path(n).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{n:?}"
            );
        }
        assert_eq!(netns_path("x").unwrap(), Path::new("/run/netns/x"));
    }

    #[test]
    fn missing_namespace_is_not_found_and_named() {
        let e = run_in_netns("twk-definitely-missing", || Ok(())).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("twk-definitely-missing"), "{e}");
    }
}
