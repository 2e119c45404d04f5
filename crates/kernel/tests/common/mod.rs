//! Shared helpers for the integration tests: real network namespaces named
//! `twk-<pid>-<n>`, always deleted (guard with Drop), and TCP endpoints
//! created inside them.
#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use tcpwhy_kernel::netns::run_in_netns;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// True if running as root; otherwise prints a skip message.
pub fn root_or_skip(test: &str) -> bool {
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    eprintln!("SKIP {test}: needs root (network namespaces, tracefs)");
    false
}

/// A named network namespace with loopback up, deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new() -> Netns {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let name = format!("twk-{}-{n}", std::process::id());
        let st = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .expect("run ip");
        assert!(st.success(), "ip netns add {name} failed");
        let ns = Netns { name };
        let st = Command::new("ip")
            .args(["-n", &ns.name, "link", "set", "lo", "up"])
            .status()
            .expect("run ip");
        assert!(st.success(), "lo up in {} failed", ns.name);
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

pub fn setsockopt_int(fd: i32, level: i32, opt: i32, v: i32) {
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &v as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as u32,
        )
    };
    assert_eq!(
        r,
        0,
        "setsockopt({level},{opt}) failed: {}",
        io::Error::last_os_error()
    );
}

pub fn so_cookie(fd: i32) -> u64 {
    let mut v: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_COOKIE,
            &mut v as *mut u64 as *mut libc::c_void,
            &mut len,
        )
    };
    assert_eq!(r, 0, "SO_COOKIE: {}", io::Error::last_os_error());
    v
}

pub fn inode_of(fd: i32) -> u64 {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::fstat(fd, &mut st) }, 0);
    st.st_ino
}

/// A connected pair inside `ns`: (listener, client, accepted server side).
/// `rcvbuf` is set on the listener (inherited by the accepted socket)
/// before the connection is made.
pub fn pair_in(ns: &str, bind: &str, rcvbuf: Option<i32>) -> (TcpListener, TcpStream, TcpStream) {
    let bind: SocketAddr = bind.parse().unwrap();
    run_in_netns(ns, || {
        let l = TcpListener::bind(bind)?;
        if let Some(b) = rcvbuf {
            setsockopt_int(l.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, b);
        }
        let c = TcpStream::connect(l.local_addr()?)?;
        let (s, _) = l.accept()?;
        Ok((l, c, s))
    })
    .expect("create TCP pair in namespace")
}

/// Write `total` bytes from `tx` on a thread while reading them all from
/// `rx`; returns (bytes written, bytes read).
pub fn transfer(tx: &TcpStream, rx: &TcpStream, total: usize) -> (usize, usize) {
    let mut txc = tx.try_clone().unwrap();
    let w = std::thread::spawn(move || {
        let chunk = vec![0x5au8; 64 * 1024];
        let mut sent = 0;
        while sent < total {
            let n = (total - sent).min(chunk.len());
            txc.write_all(&chunk[..n]).unwrap();
            sent += n;
        }
        sent
    });
    let mut rxc = rx.try_clone().unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0;
    while got < total {
        let n = rxc.read(&mut buf).unwrap();
        assert!(n > 0, "unexpected EOF after {got} bytes");
        got += n;
    }
    (w.join().unwrap(), got)
}
