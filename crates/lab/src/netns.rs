//! Named network namespaces for one lab run, always removed again.
//!
//! Names are `tcpwhy-<pid>-<n>-<role>`: the pid of the run that owns them
//! keeps concurrent runs apart and lets `tcpwhy lab clean` tell a live run's
//! namespaces from a crashed one's. A [`Namespace`] deletes itself on drop;
//! [`install_signal_handlers`] turns SIGINT/SIGTERM/SIGHUP into a flag the
//! runner polls, so Ctrl-C unwinds through those drops.

use std::io;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Prefix of every namespace the lab creates.
pub const PREFIX: &str = "tcpwhy-";

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static COUNTER: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Make SIGINT, SIGTERM and SIGHUP set [`interrupted`] instead of killing
/// the process, so that the namespaces are removed on the way out.
pub fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// True once a termination signal arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Run a command, returning stdout; the error carries the command and stderr.
pub fn run(cmd: &mut Command) -> io::Result<String> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| {
        io::Error::new(e.kind(), format!("cannot run {:?}: {e}", cmd.get_program()))
    })?;
    if !out.status.success() {
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        return Err(io::Error::other(format!(
            "`{} {}` failed: {}",
            cmd.get_program().to_string_lossy(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip ARGS...` in the root namespace.
pub fn ip(args: &[&str]) -> io::Result<String> {
    run(Command::new("ip").args(args))
}

/// A named network namespace, deleted on drop.
#[derive(Debug)]
pub struct Namespace {
    name: String,
}

impl Namespace {
    /// Create `tcpwhy-<pid>-<n>-<role>` with loopback up.
    pub fn create(role: &str) -> io::Result<Namespace> {
        if !role.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad namespace role {role:?}")));
        }
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let name = format!("{PREFIX}{}-{n}-{role}", std::process::id());
        ip(&["netns", "add", &name])?;
        let ns = Namespace { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bind-mounted namespace file, for setns(2).
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// `ip -n NAME ARGS...`
    pub fn ip(&self, args: &[&str]) -> io::Result<String> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// A command that runs `program` inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// `tc ARGS...` inside the namespace.
    pub fn tc(&self, args: &[&str]) -> io::Result<String> {
        let mut c = Command::new("tc");
        c.args(["-n", &self.name]).args(args);
        run(&mut c)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = delete(&self.name);
    }
}

fn delete(name: &str) -> io::Result<()> {
    // kill anything still running inside (tcpdump, agents) first
    if let Ok(pids) = run(Command::new("ip").args(["netns", "pids", name])) {
        for pid in pids.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    ip(&["netns", "del", name]).map(|_| ())
}

/// The lab namespaces that exist now: (name, owner pid, owner alive).
pub fn list_lab_namespaces() -> io::Result<Vec<(String, u32, bool)>> {
    let out = ip(&["netns", "list"])?;
    let mut v = Vec::new();
    for line in out.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if let Some(rest) = name.strip_prefix(PREFIX) {
            let pid: u32 = rest.split('-').next().and_then(|p| p.parse().ok()).unwrap_or(0);
            let alive = pid != 0 && std::path::Path::new(&format!("/proc/{pid}")).exists();
            v.push((name.to_string(), pid, alive));
        }
    }
    Ok(v)
}

/// Remove lab namespaces left by runs that no longer exist (all of them
/// with `all`); returns the names removed.
pub fn clean(all: bool) -> io::Result<Vec<String>> {
    let mut removed = Vec::new();
    for (name, _pid, alive) in list_lab_namespaces()? {
        if all || !alive {
            delete(&name)?;
            removed.push(name);
        }
    }
    Ok(removed)
}
