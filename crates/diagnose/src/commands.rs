//! Each fix in the terms of the system of the end it applies to
//! (crate::system names the system; the fixes are written for Linux).

use crate::model::{Fix, SystemCommands};
use crate::system::System;

/// Windows's auto-tuning level "normal" scales the window by 2^8: a
/// window of up to 16 MiB (Microsoft, "netsh interface tcp" reference);
/// "experimental" by 2^14.
pub const WINDOWS_NORMAL_WINDOW_MAX: u64 = 65535 << 8;
/// macOS's and FreeBSD's `kern.ipc.maxsockbuf` default (8 MiB): an
/// auto-tuning maximum above it needs it raised too, to twice the buffer
/// (the limit counts the buffer's overhead).
pub const BSD_MAXSOCKBUF_DEFAULT: u64 = 8 << 20;

/// Rewrites each fix in the terms of the system of the end it applies to:
/// the fixes are written for Linux; an end known to run something else
/// gets that system's commands instead; an end whose system is unknown
/// keeps Linux's, with the others in `other_systems`.
pub(crate) fn localize(fixes: &mut [Fix], sender: System, receiver: System) {
    for fix in fixes.iter_mut() {
        let end = match fix.on {
            "receiver" => receiver,
            // Pacing and congestion control on the path are the sender's.
            "sender" | "path" => sender,
            _ if sender == receiver => sender,
            _ => System::Unknown,
        };
        if fix.commands.is_empty() {
            continue;
        }
        match end {
            System::Linux => fix.system = "linux",
            System::Unknown => {
                fix.system = "linux";
                fix.other_systems = [System::Windows, System::Macos, System::Freebsd]
                    .into_iter()
                    .map(|sys| SystemCommands { system: sys.as_str(), commands: commands_on(fix, sys) })
                    .filter(|c| !c.commands.is_empty())
                    .collect();
            }
            sys => {
                fix.commands = commands_on(fix, sys);
                fix.system = sys.as_str();
            }
        }
    }
}

/// One fix's commands on a system other than Linux. Settings with no
/// counterpart there are left out; the lines that are not Linux settings
/// (an nginx directive, `ss`) stay.
fn commands_on(fix: &Fix, sys: System) -> Vec<String> {
    let buf = fix.buffer_bytes.unwrap_or(4 << 20);
    let maxsockbuf = (2 * buf).max(BSD_MAXSOCKBUF_DEFAULT);
    let bsd = |set: &str| match sys {
        System::Freebsd => format!("sysctl {set}"),
        _ => format!("sysctl -w {set}"),
    };
    // BBR only where the Linux fix switches to it (not for a BBR sender).
    let to_bbr = fix.commands.iter().any(|c| c.contains("tcp_congestion_control=bbr"));
    let bbr = match sys {
        _ if !to_bbr => vec![],
        System::Windows => vec!["netsh int tcp set supplemental template=internet congestionprovider=bbr2   # sender, Windows 11 22H2 and later".to_string()],
        System::Freebsd => vec!["kldload tcp_bbr".to_string(), bsd("net.inet.tcp.functions_default=bbr   # sender")],
        _ => vec![],
    };
    let mut out: Vec<String> = match (fix.kind, sys) {
        ("enable_window_scaling", System::Windows) => vec![
            "netsh int tcp set global autotuninglevel=normal   # window scaling is offered whenever auto-tuning is on".into(),
            r"reg add HKLM\SYSTEM\CurrentControlSet\Services\Tcpip\Parameters /v Tcp1323Opts /t REG_DWORD /d 1 /f   # Windows XP and Server 2003".into(),
        ],
        ("enable_window_scaling", _) => vec![bsd("net.inet.tcp.rfc1323=1")],
        ("raise_tcp_rmem", System::Windows) => vec![format!(
            "netsh int tcp set global autotuninglevel={}   # the window may then grow to {}",
            if buf <= WINDOWS_NORMAL_WINDOW_MAX { "normal" } else { "experimental" },
            if buf <= WINDOWS_NORMAL_WINDOW_MAX { "16 MiB" } else { "1 GiB" },
        )],
        ("raise_tcp_rmem", System::Macos) => vec![bsd(&format!("kern.ipc.maxsockbuf={maxsockbuf}")), bsd(&format!("net.inet.tcp.autorcvbufmax={buf}"))],
        ("raise_tcp_rmem", _) => vec![bsd(&format!("kern.ipc.maxsockbuf={maxsockbuf}")), bsd(&format!("net.inet.tcp.recvbuf_max={buf}"))],
        ("raise_tcp_wmem", System::Windows) => {
            vec![format!("# Windows sizes the send buffer itself (ideal send backlog) unless the application sets SO_SNDBUF: remove that setting, or set it to {buf}")]
        }
        ("raise_tcp_wmem", System::Macos) => vec![bsd(&format!("kern.ipc.maxsockbuf={maxsockbuf}")), bsd(&format!("net.inet.tcp.autosndbufmax={buf}"))],
        ("raise_tcp_wmem", _) => vec![bsd(&format!("kern.ipc.maxsockbuf={maxsockbuf}")), bsd(&format!("net.inet.tcp.sendbuf_max={buf}"))],
        ("policer_not_host", System::Windows) => {
            let mut v: Vec<String> = fix
                .pace_bps
                .map(|r| format!("New-NetQosPolicy -Name tcpwhy-pace -IPProtocolMatchCondition TCP -ThrottleRateActionBitsPerSecond {}   # sender: pace below the policer", r as u64))
                .into_iter()
                .collect();
            v.extend(bbr.clone());
            v
        }
        ("policer_not_host" | "pace_bursts" | "shaper_queue" | "find_lossy_link", _) => bbr.clone(),
        // BSD netstat shows each socket's Recv-Q as ss does (Windows's
        // netstat has no queue columns).
        ("receiver_reads_faster", System::Macos | System::Freebsd) => {
            vec!["netstat -an -p tcp   # on the receiver: Recv-Q stays non-empty".to_string()]
        }
        ("flush_tcp_metrics", System::Freebsd) => vec![bsd("net.inet.tcp.hostcache.purgenow=1"), bsd("net.inet.tcp.hostcache.enable=0")],
        _ => vec![],
    };
    // Lines that are not Linux settings (an application's, a proxy's) hold
    // on every system.
    if out.is_empty() || !matches!(fix.kind, "enable_window_scaling" | "raise_tcp_rmem" | "raise_tcp_wmem") {
        let portable = fix.commands.iter().filter(|c| !is_linux_only(c));
        out.extend(portable.filter(|c| !out.contains(c)).cloned().collect::<Vec<_>>());
    }
    out
}

/// A command only Linux understands.
fn is_linux_only(cmd: &str) -> bool {
    cmd.starts_with("sysctl") || cmd.starts_with("tc ") || cmd.starts_with("ss ") || cmd.starts_with("ip tcp_metrics") || cmd.starts_with("setsockopt")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fix_is_written_for_its_end() {
        let rmem = || Fix {
            kind: "raise_tcp_rmem",
            on: "receiver",
            commands: vec!["sysctl -w net.ipv4.tcp_rmem=\"4096 131072 8388608\"".into()],
            buffer_bytes: Some(8 << 20),
            ..Default::default()
        };
        let mut f = [rmem()];
        localize(&mut f, System::Linux, System::Windows);
        assert_eq!(f[0].system, "windows");
        assert_eq!(f[0].commands[0].split("   #").next(), Some("netsh int tcp set global autotuninglevel=normal"));
        let mut f = [rmem()];
        localize(&mut f, System::Windows, System::Linux);
        assert_eq!((f[0].system, f[0].other_systems.len()), ("linux", 0));
        let mut f = [rmem()];
        localize(&mut f, System::Linux, System::Unknown);
        assert_eq!(f[0].system, "linux");
        let systems: Vec<&str> = f[0].other_systems.iter().map(|c| c.system).collect();
        assert_eq!(systems, ["windows", "macos", "freebsd"]);
        assert!(f[0].other_systems[1].commands.contains(&"sysctl -w net.inet.tcp.autorcvbufmax=8388608".to_string()));
        // kern.ipc.maxsockbuf counts the overhead: twice the buffer.
        assert!(f[0].other_systems[2].commands.contains(&"sysctl kern.ipc.maxsockbuf=16777216".to_string()));
    }
}
