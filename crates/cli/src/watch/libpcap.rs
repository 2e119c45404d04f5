//! libpcap, loaded when `watch` starts (dlopen through `libloading`), so
//! that building tcpwhy needs no libpcap and everything but `watch` runs
//! without it. Only what `watch` and the capture_floor bench use is
//! declared, as in libpcap's pcap/pcap.h (1.5 or later: immediate mode and
//! nanosecond time stamps).
//!
//! The library is looked for under its run-time names (`libpcap.so.1`, as
//! Fedora and upstream install it; `libpcap.so.0.8`, Debian's libpcap0.8;
//! `libpcap.so`, the development link), or under the one name or path in
//! `TCPWHY_LIBPCAP`. It is loaded once and stays loaded.
//!
//! `Capture` is a safe handle on a `pcap_t`: dropping it closes it, and its
//! errors carry pcap_geterr's text and the status code.

use libloading::Library;
use std::ffi::{c_char, c_int, c_uchar, c_uint, CStr, CString};
use std::fmt;
use std::ptr::NonNull;
use std::sync::OnceLock;

/// The environment variable naming the library to load instead of the
/// default names (a file name the dynamic loader searches for, or a path).
pub const LIBPCAP_ENV: &str = "TCPWHY_LIBPCAP";

#[cfg(not(target_os = "macos"))]
const NAMES: &[&str] = &["libpcap.so.1", "libpcap.so.0.8", "libpcap.so"];
#[cfg(target_os = "macos")]
const NAMES: &[&str] = &["libpcap.A.dylib", "libpcap.dylib"];

/// Where to get libpcap, for the message when it cannot be loaded.
pub const INSTALL_HINT: &str = "install it with `apt install libpcap0.8` (Debian/Ubuntu; libpcap0.8t64 on Debian 13 and Ubuntu 24.04), \
`dnf install libpcap` (Fedora/RHEL), `apk add libpcap` (Alpine) or `pacman -S libpcap` (Arch)";

// Status codes (pcap/pcap.h).
pub const PCAP_ERROR: c_int = -1;
pub const PCAP_ERROR_NO_SUCH_DEVICE: c_int = -5;
pub const PCAP_ERROR_PERM_DENIED: c_int = -8;
pub const PCAP_ERROR_PROMISC_PERM_DENIED: c_int = -11;
const PCAP_TSTAMP_PRECISION_NANO: c_int = 1;
const PCAP_ERRBUF_SIZE: usize = 256;

/// `pcap_t`: opaque.
#[repr(C)]
struct PcapT {
    _private: [u8; 0],
}

/// `struct pcap_pkthdr`: a `struct timeval`, then caplen and len.
#[repr(C)]
struct PktHdr {
    ts: libc::timeval,
    caplen: u32,
    len: u32,
}

/// `struct pcap_stat` outside Windows: three u_int.
#[repr(C)]
#[derive(Default)]
struct Stat {
    ps_recv: c_uint,
    ps_drop: c_uint,
    ps_ifdrop: c_uint,
}

/// `struct bpf_program` (pcap/bpf.h); the instructions stay libpcap's.
#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut std::ffi::c_void,
}

/// Declares the functions used, and `Fns::load` to look each one up.
macro_rules! pcap_functions {
    ($($name:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        #[allow(non_snake_case)]
        struct Fns {
            $($name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }
        impl Fns {
            /// # Safety
            /// `lib` is libpcap, and outlives the pointers taken from it.
            unsafe fn load(lib: &Library) -> Result<Fns, String> {
                Ok(Fns {
                    $($name: *lib
                        .get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(concat!(stringify!($name), "\0").as_bytes())
                        .map_err(|_| stringify!($name).to_string())?,)*
                })
            }
        }
    };
}

pcap_functions! {
    pcap_create: fn(*const c_char, *mut c_char) -> *mut PcapT;
    pcap_set_snaplen: fn(*mut PcapT, c_int) -> c_int;
    pcap_set_promisc: fn(*mut PcapT, c_int) -> c_int;
    pcap_set_timeout: fn(*mut PcapT, c_int) -> c_int;
    pcap_set_immediate_mode: fn(*mut PcapT, c_int) -> c_int;
    pcap_set_buffer_size: fn(*mut PcapT, c_int) -> c_int;
    pcap_set_tstamp_precision: fn(*mut PcapT, c_int) -> c_int;
    pcap_activate: fn(*mut PcapT) -> c_int;
    pcap_compile: fn(*mut PcapT, *mut BpfProgram, *const c_char, c_int, u32) -> c_int;
    pcap_setfilter: fn(*mut PcapT, *mut BpfProgram) -> c_int;
    pcap_freecode: fn(*mut BpfProgram);
    pcap_setnonblock: fn(*mut PcapT, c_int, *mut c_char) -> c_int;
    pcap_get_selectable_fd: fn(*mut PcapT) -> c_int;
    pcap_next_ex: fn(*mut PcapT, *mut *mut PktHdr, *mut *const c_uchar) -> c_int;
    pcap_stats: fn(*mut PcapT, *mut Stat) -> c_int;
    pcap_datalink: fn(*mut PcapT) -> c_int;
    pcap_geterr: fn(*mut PcapT) -> *mut c_char;
    pcap_statustostr: fn(c_int) -> *const c_char;
    pcap_close: fn(*mut PcapT);
}

/// The loaded library.
pub struct Lib {
    fns: Fns,
    _lib: Library,
}

/// Why libpcap could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// No name gave a library: each name tried, and the loader's last word.
    NotInstalled { tried: Vec<String>, reason: String },
    /// A library was found but lacks a function (older than libpcap 1.5).
    TooOld { name: String, function: String },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NotInstalled { tried, reason } => write!(
                f,
                "libpcap is not installed: {INSTALL_HINT}\n(looked for {}; last error: {reason})",
                tried.join(", ")
            ),
            LoadError::TooOld { name, function } => write!(
                f,
                "{name} has no {function}: libpcap 1.5 or later is needed; {INSTALL_HINT}"
            ),
        }
    }
}

/// libpcap, loaded on the first call (the names in `TCPWHY_LIBPCAP`, or
/// the default ones, in order).
pub fn load() -> Result<&'static Lib, &'static LoadError> {
    static LIB: OnceLock<Result<Lib, LoadError>> = OnceLock::new();
    LIB.get_or_init(|| {
        let names: Vec<String> = match std::env::var(LIBPCAP_ENV) {
            Ok(v) if !v.is_empty() => vec![v],
            _ => NAMES.iter().map(|n| n.to_string()).collect(),
        };
        load_from(&names)
    })
    .as_ref()
}

fn load_from(names: &[String]) -> Result<Lib, LoadError> {
    let mut reason = String::new();
    for name in names {
        // SAFETY: libpcap's initialisers are those of an ordinary C library.
        match unsafe { Library::new(name) } {
            Ok(lib) => {
                // SAFETY: the pointers live in `Lib` beside the library.
                let fns = unsafe { Fns::load(&lib) }.map_err(|function| LoadError::TooOld {
                    name: name.clone(),
                    function,
                })?;
                return Ok(Lib { fns, _lib: lib });
            }
            Err(e) => reason = e.to_string(),
        }
    }
    Err(LoadError::NotInstalled {
        tried: names.to_vec(),
        reason,
    })
}

impl Lib {
    /// pcap_statustostr: the text of a status code.
    pub fn status_text(&self, status: c_int) -> String {
        // SAFETY: returns a static string (or a static buffer for unknown codes).
        unsafe { text((self.fns.pcap_statustostr)(status)) }
    }
}

/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// A libpcap failure: its status code and message.
#[derive(Debug, Clone)]
pub struct Error {
    pub status: c_int,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// One packet, borrowed from libpcap's buffer until the next read.
pub struct Packet<'a> {
    /// Nanoseconds since the Unix epoch.
    pub time_ns: i64,
    /// Length on the wire.
    pub len: u32,
    /// The bytes captured (caplen of them).
    pub data: &'a [u8],
}

/// What pcap_next_ex gave.
pub enum Next<'a> {
    Packet(Packet<'a>),
    /// No packet: the read timeout, or nothing waiting (non-blocking).
    Timeout,
    /// The capture failed (the interface went away): pcap_geterr's text.
    Error(String),
    /// No more packets.
    End,
}

/// The kernel's drop counters (pcap_stats).
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    pub dropped: u32,
    pub if_dropped: u32,
}

/// A packet's time in nanoseconds: with nanosecond precision libpcap puts
/// nanoseconds in `tv_usec`.
// time_t and suseconds_t are i32 on some targets: the casts are not no-ops there.
#[allow(clippy::unnecessary_cast)]
fn time_ns(ts: &libc::timeval, nano: bool) -> i64 {
    let frac = ts.tv_usec as i64;
    ts.tv_sec as i64 * 1_000_000_000 + if nano { frac } else { frac * 1000 }
}

/// A capture handle (pcap_t); closed on drop.
pub struct Capture {
    lib: &'static Lib,
    p: NonNull<PcapT>,
    /// Time stamps are in nanoseconds (pcap_set_tstamp_precision took NANO).
    nano: bool,
}

impl Drop for Capture {
    fn drop(&mut self) {
        // SAFETY: the handle is open and used no more.
        unsafe { (self.lib.fns.pcap_close)(self.p.as_ptr()) }
    }
}

impl Capture {
    /// pcap_create: a handle on `device`, to set up and then activate.
    pub fn create(lib: &'static Lib, device: &str) -> Result<Capture, Error> {
        let name = CString::new(device).map_err(|_| Error {
            status: PCAP_ERROR,
            message: "an interface name cannot hold a NUL byte".into(),
        })?;
        let mut errbuf = [0 as c_char; PCAP_ERRBUF_SIZE];
        // SAFETY: a NUL-terminated name and an errbuf of PCAP_ERRBUF_SIZE.
        let p = unsafe { (lib.fns.pcap_create)(name.as_ptr(), errbuf.as_mut_ptr()) };
        match NonNull::new(p) {
            Some(p) => Ok(Capture {
                lib,
                p,
                nano: false,
            }),
            // SAFETY: libpcap wrote a NUL-terminated message.
            None => Err(Error {
                status: PCAP_ERROR,
                message: unsafe { text(errbuf.as_ptr()) },
            }),
        }
    }

    fn raw(&self) -> *mut PcapT {
        self.p.as_ptr()
    }

    /// pcap_geterr's text, or the status's when libpcap left none.
    fn error(&self, status: c_int) -> Error {
        // SAFETY: the handle is open; geterr returns its NUL-terminated buffer.
        let mut message = unsafe { text((self.lib.fns.pcap_geterr)(self.raw())) };
        if message.is_empty() && status != PCAP_ERROR {
            message = self.lib.status_text(status);
        }
        Error { status, message }
    }

    // Settings before pcap_activate. Each fails only on an activated
    // handle, which these never see; the status is not looked at.

    pub fn set_snaplen(&mut self, bytes: i32) {
        // SAFETY: an open handle (for these setters alike).
        unsafe { (self.lib.fns.pcap_set_snaplen)(self.raw(), bytes) };
    }
    pub fn set_promisc(&mut self, on: bool) {
        unsafe { (self.lib.fns.pcap_set_promisc)(self.raw(), on as c_int) };
    }
    pub fn set_timeout(&mut self, ms: i32) {
        unsafe { (self.lib.fns.pcap_set_timeout)(self.raw(), ms) };
    }
    pub fn set_immediate_mode(&mut self, on: bool) {
        unsafe { (self.lib.fns.pcap_set_immediate_mode)(self.raw(), on as c_int) };
    }
    pub fn set_buffer_size(&mut self, bytes: i32) {
        unsafe { (self.lib.fns.pcap_set_buffer_size)(self.raw(), bytes) };
    }
    /// Nanosecond time stamps; false when the device has only microseconds
    /// (the packets' times are then converted).
    pub fn set_nanosecond_precision(&mut self) -> bool {
        let r = unsafe {
            (self.lib.fns.pcap_set_tstamp_precision)(self.raw(), PCAP_TSTAMP_PRECISION_NANO)
        };
        self.nano = r == 0;
        self.nano
    }

    /// pcap_activate. A warning (the capture runs, e.g. no promiscuous
    /// mode) is returned as Ok(Some(text)); an error carries its status
    /// (PCAP_ERROR_NO_SUCH_DEVICE, PCAP_ERROR_PERM_DENIED, ...).
    pub fn activate(&mut self) -> Result<Option<String>, Error> {
        // SAFETY: an open, not yet activated handle.
        let status = unsafe { (self.lib.fns.pcap_activate)(self.raw()) };
        match status {
            0 => Ok(None),
            s if s > 0 => {
                let e = self.error(s);
                let kind = self.lib.status_text(s);
                Ok(Some(if e.message.is_empty() || e.message == kind {
                    kind
                } else {
                    format!("{kind}: {}", e.message)
                }))
            }
            s => Err(self.error(s)),
        }
    }

    /// pcap_compile (optimised, netmask 0 as the pcap crate passed) and
    /// pcap_setfilter; the program is freed either way.
    pub fn set_filter(&mut self, expr: &str) -> Result<(), Error> {
        let expr = CString::new(expr).map_err(|_| Error {
            status: PCAP_ERROR,
            message: "a filter cannot hold a NUL byte".into(),
        })?;
        let mut prog = BpfProgram {
            bf_len: 0,
            bf_insns: std::ptr::null_mut(),
        };
        // SAFETY: an activated handle, a NUL-terminated expression, a program to fill.
        if unsafe { (self.lib.fns.pcap_compile)(self.raw(), &mut prog, expr.as_ptr(), 1, 0) } != 0 {
            return Err(self.error(PCAP_ERROR));
        }
        // SAFETY: the program pcap_compile filled; libpcap copies it.
        let r = unsafe { (self.lib.fns.pcap_setfilter)(self.raw(), &mut prog) };
        let result = if r != 0 {
            Err(self.error(PCAP_ERROR))
        } else {
            Ok(())
        };
        // SAFETY: frees what pcap_compile allocated.
        unsafe { (self.lib.fns.pcap_freecode)(&mut prog) };
        result
    }

    /// pcap_setnonblock(1): a read with nothing waiting returns at once.
    pub fn set_nonblock(&mut self) -> Result<(), Error> {
        let mut errbuf = [0 as c_char; PCAP_ERRBUF_SIZE];
        // SAFETY: an activated handle and an errbuf of PCAP_ERRBUF_SIZE.
        if unsafe { (self.lib.fns.pcap_setnonblock)(self.raw(), 1, errbuf.as_mut_ptr()) } != 0 {
            // SAFETY: libpcap wrote a NUL-terminated message.
            return Err(Error {
                status: PCAP_ERROR,
                message: unsafe { text(errbuf.as_ptr()) },
            });
        }
        Ok(())
    }

    /// pcap_get_selectable_fd: the descriptor to poll, -1 if there is none.
    pub fn selectable_fd(&self) -> std::os::fd::RawFd {
        // SAFETY: an activated handle.
        unsafe { (self.lib.fns.pcap_get_selectable_fd)(self.raw()) }
    }

    /// pcap_datalink: the DLT_* of the capture.
    pub fn datalink(&self) -> i32 {
        // SAFETY: an activated handle.
        unsafe { (self.lib.fns.pcap_datalink)(self.raw()) }
    }

    /// pcap_next_ex: the next packet, valid until the next call.
    #[inline]
    pub fn next_packet(&mut self) -> Next<'_> {
        let mut hdr: *mut PktHdr = std::ptr::null_mut();
        let mut data: *const c_uchar = std::ptr::null();
        // SAFETY: an activated handle and two out-pointers.
        let r = unsafe { (self.lib.fns.pcap_next_ex)(self.raw(), &mut hdr, &mut data) };
        match r {
            1 if !hdr.is_null() => {
                // SAFETY: on 1 libpcap set both: a header and caplen bytes,
                // valid until the next read on this handle (borrowed by 'a).
                let (h, data) = unsafe {
                    (
                        &*hdr,
                        std::slice::from_raw_parts(data, (*hdr).caplen as usize),
                    )
                };
                Next::Packet(Packet {
                    time_ns: time_ns(&h.ts, self.nano),
                    len: h.len,
                    data,
                })
            }
            0 => Next::Timeout,
            -2 => Next::End,
            _ => Next::Error(self.error(PCAP_ERROR).message),
        }
    }

    /// pcap_stats.
    pub fn stats(&mut self) -> Result<Stats, Error> {
        let mut s = Stat::default();
        // SAFETY: an activated handle and a struct pcap_stat to fill.
        if unsafe { (self.lib.fns.pcap_stats)(self.raw(), &mut s) } != 0 {
            return Err(self.error(PCAP_ERROR));
        }
        Ok(Stats {
            dropped: s.ps_drop,
            if_dropped: s.ps_ifdrop,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_structs_have_libpcaps_layout() {
        // x86_64 and aarch64 Linux: timeval is two 8-byte fields.
        #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
        assert_eq!(std::mem::size_of::<PktHdr>(), 24);
        assert_eq!(std::mem::size_of::<Stat>(), 12);
        assert_eq!(
            std::mem::size_of::<BpfProgram>(),
            2 * std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn a_missing_library_names_what_to_install() {
        let e = load_from(&["/nonexistent/libpcap.so.1".to_string()])
            .err()
            .expect("no such file");
        let m = e.to_string();
        assert!(
            m.starts_with("libpcap is not installed: install it with `apt install libpcap0.8`"),
            "{m}"
        );
        assert!(m.contains("/nonexistent/libpcap.so.1"), "{m}");
    }

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn a_library_without_the_functions_is_too_old() {
        // libc loads but has no pcap_create.
        let e = load_from(&["libc.so.6".to_string()])
            .err()
            .expect("libc is not libpcap");
        assert!(
            matches!(&e, LoadError::TooOld { function, .. } if function == "pcap_create"),
            "{e}"
        );
    }

    #[test]
    fn a_handle_is_created_and_closed_where_libpcap_is_installed() {
        let Ok(lib) = load() else {
            eprintln!("libpcap not installed: skipped");
            return;
        };
        // pcap_create checks nothing; activating would need CAP_NET_RAW.
        let mut c = Capture::create(lib, "lo").unwrap();
        c.set_snaplen(256);
        assert!(c.set_nanosecond_precision());
        drop(c);
        assert_eq!(
            lib.status_text(PCAP_ERROR_NO_SUCH_DEVICE),
            "No such device exists"
        );
    }
}
