//! Each end's operating system, read from its SYN or SYN-ACK (the fixes
//! are written in its terms by crate::commands).
//!
//! The method is p0f's (Zalewski, p0f v3): a stack writes its handshake
//! the same way every time. The rules here are our own, each from the
//! stack's documented or published behaviour:
//!
//! - **The initial TTL.** The captured TTL (hop limit) is the sender's
//!   default less the routers passed: Linux 64 (`net.ipv4.ip_default_ttl`,
//!   Documentation/networking/ip-sysctl.rst), macOS and FreeBSD 64
//!   (`net.inet.ip.ttl`), Windows 128 (`DefaultTTL`, Microsoft's TCP/IP
//!   registry reference). It is read as the smallest of
//!   [`INITIAL_TTLS`] at or above the captured value, and only when that
//!   leaves at most [`MAX_HOPS`] routers.
//! - **The options' order**, padding included. Linux's `tcp_options_write()`
//!   (net/ipv4/tcp_output.c) writes MSS, then SACK-permitted packed with the
//!   timestamps ("sok,ts"), or NOP NOP before either alone, then NOP and the
//!   window scale last. Windows (p0f's Windows 7-11 signatures, and every
//!   Windows SYN in the shared captures) writes MSS, NOP, window scale, NOP,
//!   NOP, SACK-permitted, without timestamps by default. XNU's
//!   `tcp_output()` (macOS, iOS) writes MSS, NOP, window scale, NOP, NOP,
//!   timestamps, SACK-permitted and pads with End-of-Option-List. FreeBSD's
//!   `tcp_addoptions()` writes MSS, NOP, window scale, SACK-permitted, then
//!   NOPs to align the timestamps.
//!
//! A system is named `high` when both agree, `medium` when the order is a
//! stack's but the TTL cannot tell (too many hops, or an order two stacks
//! share), and `unknown` otherwise, with what was seen. A middlebox that
//! answers for a server (a SYN proxy, a load balancer) shows its own stack,
//! not the server's: the evidence says which segment was read.

use serde::Serialize;
use tcpwhy_core::Confidence;
use tcpwhy_flow::SynOptions;

/// The stacks' default initial TTLs, smallest first (32: Windows 95/NT 3;
/// 255: Solaris, AIX and most routers).
pub const INITIAL_TTLS: [u8; 4] = [OLD_WINDOWS_TTL, UNIX_TTL, WINDOWS_TTL, ROUTER_TTL];
/// Linux, macOS and FreeBSD's initial TTL.
pub const UNIX_TTL: u8 = 64;
/// Windows's initial TTL (`DefaultTTL`).
pub const WINDOWS_TTL: u8 = 128;
/// Windows 95 and NT 3's initial TTL.
pub const OLD_WINDOWS_TTL: u8 = 32;
/// Solaris's, AIX's and most routers' initial TTL.
pub const ROUTER_TTL: u8 = 255;
/// Routers a path may plausibly cross: Internet paths are 10 to 20 hops,
/// rarely over 30 (p0f's fingerprint distance check uses the same order).
/// A TTL further than this below its candidate default tells nothing.
pub const MAX_HOPS: u8 = 32;

/// The option orders each stack writes (p0f's spelling; see the module
/// docs for the source of each).
pub const LINUX_LAYOUTS: [&str; 8] = [
    "mss,sok,ts,nop,ws",
    "mss,nop,nop,ts,nop,ws",
    "mss,nop,nop,sok,nop,ws",
    "mss,nop,ws",
    "mss,sok,ts",
    "mss,nop,nop,ts",
    "mss,nop,nop,sok",
    "mss",
];
pub const WINDOWS_LAYOUTS: [&str; 3] = ["mss,nop,ws,nop,nop,sok", "mss,nop,nop,sok", "mss,nop,ws,sok,ts"];
pub const MACOS_LAYOUTS: [&str; 2] = ["mss,nop,ws,nop,nop,ts,sok,eol", "mss,nop,ws,nop,nop,ts,sok"];
pub const FREEBSD_LAYOUTS: [&str; 2] = ["mss,nop,ws,sok,ts", "mss,nop,ws,nop,nop,ts"];
/// Orders both Windows (initial TTL 128) and a TTL-64 stack write: named
/// only with the TTL's help. "mss" alone names nothing: several stacks
/// with options off, SYN cookies and middleboxes that strip options all
/// send it.
pub const SHARED_LAYOUTS: [&str; 3] = ["mss,nop,nop,sok", "mss", "mss,nop,ws,sok,ts"];
/// An order old Linux (2.4, options off) writes, and other Unix stacks
/// too: named at medium confidence.
pub const AMBIGUOUS_UNIX_LAYOUTS: [&str; 1] = ["mss,nop,nop,sok"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum System {
    Linux,
    Windows,
    Macos,
    Freebsd,
    Unknown,
}

impl System {
    pub fn as_str(self) -> &'static str {
        match self {
            System::Linux => "linux",
            System::Windows => "windows",
            System::Macos => "macos",
            System::Freebsd => "freebsd",
            System::Unknown => "unknown",
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            System::Linux => "Linux",
            System::Windows => "Windows",
            System::Macos => "macOS",
            System::Freebsd => "FreeBSD",
            System::Unknown => "unknown",
        }
    }

    /// The system by its JSON name (`as_str`), as a fix's `system` holds it.
    pub fn from_name(name: &str) -> Option<System> {
        [System::Linux, System::Windows, System::Macos, System::Freebsd, System::Unknown].into_iter().find(|s| s.as_str() == name)
    }
}

/// What one end runs, as its handshake shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SystemGuess {
    pub name: System,
    /// null when `name` is unknown.
    pub confidence: Option<Confidence>,
    /// The signature in words, and why it points where it does.
    pub evidence: String,
    /// The segment read: "syn", "syn_ack", or "none" (not captured).
    pub from: &'static str,
    pub initial_ttl: Option<u8>,
    pub hops: Option<u8>,
    /// The options' order, p0f's spelling ("mss,sok,ts,nop,ws").
    pub options: Option<String>,
    pub window: Option<u16>,
    pub window_scale: Option<u8>,
    pub mss: Option<u16>,
}

impl SystemGuess {
    pub fn unknown_without_syn() -> SystemGuess {
        SystemGuess {
            name: System::Unknown,
            confidence: None,
            evidence: "the capture holds no SYN or SYN-ACK from this end".into(),
            from: "none",
            initial_ttl: None,
            hops: None,
            options: None,
            window: None,
            window_scale: None,
            mss: None,
        }
    }
}

/// The stack's default TTL and the routers passed, when plausible.
pub fn initial_ttl(ttl: u8) -> Option<(u8, u8)> {
    let init = *INITIAL_TTLS.iter().find(|&&t| t >= ttl)?;
    let hops = init - ttl;
    (hops <= MAX_HOPS).then_some((init, hops))
}

/// The system behind one SYN or SYN-ACK.
pub fn fingerprint(syn: Option<&SynOptions>) -> SystemGuess {
    let Some(s) = syn else {
        return SystemGuess::unknown_without_syn();
    };
    let layout = s.layout.describe();
    let ttl = initial_ttl(s.ttl);
    let is = |set: &[&str]| set.contains(&layout.as_str());
    let stacks = [
        (System::Macos, &MACOS_LAYOUTS[..]),
        (System::Freebsd, &FREEBSD_LAYOUTS[..]),
        (System::Windows, &WINDOWS_LAYOUTS[..]),
        (System::Linux, &LINUX_LAYOUTS[..]),
    ];
    let by_layout: Vec<System> = stacks.iter().filter(|(_, set)| is(set)).map(|(sys, _)| *sys).collect();
    let named = |sys: System, c: Confidence, why: String| (sys, Some(c), why);
    let (name, confidence, why) = match ttl.map(|t| t.0) {
        _ if layout == "mss" || layout.is_empty() => (System::Unknown, None, unknown_reason(&layout, ttl, s)),
        Some(WINDOWS_TTL) if by_layout.contains(&System::Windows) => {
            named(System::Windows, Confidence::High, "Windows's option order and initial TTL".into())
        }
        Some(UNIX_TTL) => match by_layout.iter().copied().find(|&sys| sys != System::Windows) {
            Some(sys) if is(&AMBIGUOUS_UNIX_LAYOUTS) => named(
                sys,
                Confidence::Medium,
                format!("{}'s option order, which other Unix stacks also write, with an initial TTL of 64", sys.label()),
            ),
            Some(sys) => named(sys, Confidence::High, format!("{}'s option order, and the initial TTL of 64 it uses", sys.label())),
            None => (System::Unknown, None, unknown_reason(&layout, ttl, s)),
        },
        // No TTL family to lean on: the order alone, if only one stack writes it.
        None | Some(OLD_WINDOWS_TTL) | Some(ROUTER_TTL) if by_layout.len() == 1 && !is(&SHARED_LAYOUTS) => named(
            by_layout[0],
            Confidence::Medium,
            format!("{}'s option order; the TTL does not confirm it", by_layout[0].label()),
        ),
        _ => (System::Unknown, None, unknown_reason(&layout, ttl, s)),
    };
    let what = if s.syn_ack { "SYN-ACK" } else { "SYN" };
    let mut evidence = format!(
        "{what}: TTL {}{}, options {}, window {}{}",
        s.ttl,
        ttl.map_or(String::new(), |(i, h)| format!(" (initial {i}, {h} hop{})", if h == 1 { "" } else { "s" })),
        if layout.is_empty() { "none".into() } else { layout.clone() },
        s.window,
        s.window_scale.map_or(String::new(), |w| format!(", scale {w}")),
    );
    evidence.push_str(&format!(": {why}"));
    SystemGuess {
        name,
        confidence,
        evidence,
        from: if s.syn_ack { "syn_ack" } else { "syn" },
        initial_ttl: ttl.map(|t| t.0),
        hops: ttl.map(|t| t.1),
        options: Some(layout),
        window: Some(s.window),
        window_scale: s.window_scale,
        mss: s.mss,
    }
}

fn unknown_reason(layout: &str, ttl: Option<(u8, u8)>, s: &SynOptions) -> String {
    match (ttl.map(|t| t.0), layout) {
        (Some(128), "mss") if s.syn_ack => "the initial TTL is Windows's, but a Windows SYN-ACK answers the window scale and SACK a SYN offers; this one carries only MSS, as a proxy, load balancer or SYN cookie would".into(),
        (_, "mss") => "MSS alone is written by several stacks with options off, by SYN cookies and by middleboxes that strip options".into(),
        (Some(128), _) => format!("the initial TTL is Windows's, but no Windows stack writes the options as {layout}"),
        (Some(64), _) => format!("an initial TTL of 64 (Linux, macOS, FreeBSD), but the options' order {layout} is none of theirs"),
        (Some(t), _) => format!("an initial TTL of {t} (Solaris, AIX, network devices), which this tool does not tell apart"),
        (None, _) => "the TTL is too far below any default to tell the stack, and the options' order alone does not".into(),
    }
}

/// Both ends of a connection: (a, b).
pub fn of_connection(cs: &tcpwhy_flow::ConnectionSummary) -> [SystemGuess; 2] {
    [fingerprint(cs.directions[0].syn.as_ref()), fingerprint(cs.directions[1].syn.as_ref())]
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwhy_wire::TcpOptions;

    fn syn(ttl: u8, opts: &[u8], window: u16, syn_ack: bool) -> SynOptions {
        let o = TcpOptions::parse(opts);
        SynOptions {
            ttl,
            layout: o.layout,
            window,
            window_scale: o.window_scale,
            mss: o.mss,
            syn_ack,
            ..SynOptions::default()
        }
    }

    const LINUX: [u8; 20] = [2, 4, 5, 180, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7];
    const WINDOWS: [u8; 12] = [2, 4, 5, 180, 1, 3, 3, 8, 1, 1, 4, 2];
    const MACOS: [u8; 24] = [2, 4, 5, 180, 1, 3, 3, 6, 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 4, 2, 0, 0];
    const FREEBSD: [u8; 20] = [2, 4, 5, 180, 1, 3, 3, 6, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0];

    #[test]
    fn each_stack_is_named_from_its_order_and_ttl() {
        let g = fingerprint(Some(&syn(64, &LINUX, 64240, false)));
        assert_eq!((g.name, g.confidence), (System::Linux, Some(Confidence::High)));
        let g = fingerprint(Some(&syn(121, &WINDOWS, 8192, false)));
        assert_eq!((g.name, g.confidence, g.hops), (System::Windows, Some(Confidence::High), Some(7)));
        let g = fingerprint(Some(&syn(57, &MACOS, 65535, false)));
        assert_eq!((g.name, g.confidence), (System::Macos, Some(Confidence::High)));
        let g = fingerprint(Some(&syn(61, &FREEBSD, 65535, false)));
        assert_eq!((g.name, g.confidence), (System::Freebsd, Some(Confidence::High)));
    }

    #[test]
    fn a_signature_that_contradicts_itself_is_unknown() {
        // Linux's order with Windows's TTL, and Windows's with Linux's.
        assert_eq!(fingerprint(Some(&syn(128, &LINUX, 64240, false))).name, System::Unknown);
        assert_eq!(fingerprint(Some(&syn(64, &WINDOWS, 8192, false))).name, System::Unknown);
        // A SYN-ACK with MSS alone and Windows's TTL: a proxy's, or a cookie.
        let g = fingerprint(Some(&syn(128, &[2, 4, 5, 180], 64240, true)));
        assert_eq!(g.name, System::Unknown);
        assert!(g.evidence.contains("only MSS"), "{}", g.evidence);
        // A TTL too far below any default.
        assert_eq!(initial_ttl(90), None);
        assert_eq!(fingerprint(None).from, "none");
    }

    #[test]
    fn an_order_two_stacks_share_is_medium_at_most() {
        // mss,nop,nop,sok: old Linux, or Windows XP: the TTL decides.
        let g = fingerprint(Some(&syn(64, &[2, 4, 5, 180, 1, 1, 4, 2], 5840, true)));
        assert_eq!((g.name, g.confidence), (System::Linux, Some(Confidence::Medium)));
        let g = fingerprint(Some(&syn(127, &[2, 4, 5, 100, 1, 1, 4, 2], 65535, true)));
        assert_eq!((g.name, g.confidence), (System::Windows, Some(Confidence::High)));
    }
}
