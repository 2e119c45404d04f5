//! Text outputs of the usual host tools: `sysctl -a`, `ip tcp_metrics
//! show`, `nstat -az`, `netstat -s` and the raw `/proc/net/{snmp,netstat}`.

use serde::Serialize;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// `sysctl -a` (or `sysctl net.ipv4 net.core`) text: `key = value` lines.
/// Values are whitespace-normalised; error lines are ignored.
pub fn parse_sysctl(text: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else { continue };
        let k = k.trim();
        if k.is_empty() || k.contains(' ') || k.starts_with("sysctl:") {
            continue;
        }
        m.insert(
            k.replace('/', "."),
            v.split_whitespace().collect::<Vec<_>>().join(" "),
        );
    }
    m
}

/// One `ip tcp_metrics show` entry.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct TcpMetric {
    pub addr: String,
    pub age_s: Option<f64>,
    pub rtt_us: Option<u64>,
    pub rttvar_us: Option<u64>,
    pub ssthresh: Option<u32>,
    pub cwnd: Option<u32>,
    pub reordering: Option<u32>,
    pub source: Option<String>,
}

impl TcpMetric {
    pub fn ip(&self) -> Option<IpAddr> {
        self.addr.parse().ok()
    }
}

fn time_us(v: &str) -> Option<u64> {
    let (num, mult) = if let Some(n) = v.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = v.strip_suffix("sec") {
        (n, 1e6)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1e6)
    } else {
        // Very old iproute2 printed bare ms.
        (v, 1e3)
    };
    Some((num.parse::<f64>().ok()? * mult).round() as u64)
}

/// `ip tcp_metrics show` text. Lines that do not start with an address are
/// reported as skipped.
pub fn parse_tcp_metrics(text: &str) -> (Vec<TcpMetric>, Vec<String>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for line in text.lines() {
        let toks: Vec<&str> = line.split_whitespace().collect();
        let Some(first) = toks.first() else { continue };
        if first.parse::<IpAddr>().is_err() {
            skipped.push(line.trim().to_string());
            continue;
        }
        let mut m = TcpMetric {
            addr: first.to_string(),
            ..Default::default()
        };
        let mut i = 1;
        while i < toks.len() {
            let k = toks[i];
            let v = toks.get(i + 1).copied().unwrap_or("");
            match k {
                "age" => m.age_s = time_us(v).map(|u| u as f64 / 1e6),
                "rtt" => m.rtt_us = time_us(v),
                "rttvar" => m.rttvar_us = time_us(v),
                "ssthresh" => m.ssthresh = v.parse().ok(),
                "cwnd" => m.cwnd = v.parse().ok(),
                "reordering" => m.reordering = v.parse().ok(),
                "source" => m.source = Some(v.to_string()),
                "fo_syn_drops" => {
                    // "fo_syn_drops 2/123ms ago"
                    if toks.get(i + 2) == Some(&"ago") {
                        i += 1;
                    }
                }
                _ => {}
            }
            i += 2;
        }
        out.push(m);
    }
    (out, skipped)
}

/// Counters by nstat name (`TcpExtTCPLossProbes`, `TcpRetransSegs`...).
pub type Counters = BTreeMap<String, u64>;

/// `nstat -az` / `nstat -a` text (`Name value rate`), `netstat -s` text, or
/// the raw `/proc/net/snmp` + `/proc/net/netstat` header/value line pairs;
/// recognised by content. Returns the counters and the number of lines
/// that could not be mapped to a counter name.
pub fn parse_counters(text: &str) -> (Counters, usize) {
    let lines: Vec<&str> = text.lines().collect();
    let mut c = Counters::new();
    let mut skipped = 0;
    // Raw /proc format: "TcpExt: A B C" followed by "TcpExt: 1 2 3".
    let is_raw = lines.windows(2).any(|w| {
        let (a, b) = (w[0].split_once(':'), w[1].split_once(':'));
        matches!((a, b), (Some((p1, n)), Some((p2, v))) if p1 == p2 && !p1.contains(' ')
            && n.split_whitespace().next().is_some_and(|x| x.chars().all(|ch| ch.is_ascii_alphanumeric()) && !x.chars().all(|ch| ch.is_ascii_digit()))
            && v.split_whitespace().all(|x| x.parse::<i64>().is_ok()))
    });
    if is_raw {
        for w in lines.windows(2) {
            let (Some((p1, names)), Some((p2, vals))) = (w[0].split_once(':'), w[1].split_once(':')) else {
                continue;
            };
            if p1 != p2 || !vals.split_whitespace().all(|x| x.parse::<i64>().is_ok()) || names.split_whitespace().all(|x| x.parse::<i64>().is_ok()) {
                continue;
            }
            for (n, v) in names.split_whitespace().zip(vals.split_whitespace()) {
                c.insert(format!("{p1}{n}"), v.parse::<i64>().unwrap_or(0).max(0) as u64);
            }
        }
        return (c, 0);
    }
    let is_nstat = lines.iter().any(|l| l.starts_with("#kernel"))
        || lines.iter().filter(|l| !l.trim().is_empty()).all(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            t.len() >= 2 && t[1].parse::<u64>().is_ok() && !l.starts_with(' ')
        });
    if is_nstat {
        for l in &lines {
            let t: Vec<&str> = l.split_whitespace().collect();
            if l.starts_with('#') || t.is_empty() {
                continue;
            }
            match t.get(1).and_then(|v| v.parse::<u64>().ok()) {
                Some(v) => {
                    c.insert(t[0].to_string(), v);
                }
                None => skipped += 1,
            }
        }
        return (c, skipped);
    }
    // netstat -s: sections "Tcp:", "TcpExt:", "IpExt:" ...
    let mut section = String::new();
    for l in &lines {
        if !l.starts_with(' ') && l.trim_end().ends_with(':') {
            section = l.trim().trim_end_matches(':').to_string();
            continue;
        }
        let t = l.trim();
        if t.is_empty() {
            continue;
        }
        // "TCPLossProbes: 5"
        if let Some((k, v)) = t.split_once(": ") {
            if !k.contains(' ') {
                if let Ok(v) = v.trim().parse::<u64>() {
                    c.insert(format!("{section}{k}"), v);
                    continue;
                }
            }
        }
        // "1234 segments retransmitted"
        let mut it = t.splitn(2, ' ');
        let (Some(n), Some(rest)) = (it.next(), it.next()) else {
            skipped += 1;
            continue;
        };
        let Ok(v) = n.parse::<u64>() else {
            skipped += 1;
            continue;
        };
        match netstat_sentence(&section, rest) {
            Some(name) => {
                c.insert(name.to_string(), v);
            }
            None => skipped += 1,
        }
    }
    (c, skipped)
}

/// net-tools' sentences for the counters tcpwhy reads.
fn netstat_sentence(section: &str, s: &str) -> Option<&'static str> {
    Some(match (section, s) {
        ("Tcp", "active connection openings") | ("Tcp", "active connections openings") => "TcpActiveOpens",
        ("Tcp", "passive connection openings") => "TcpPassiveOpens",
        ("Tcp", "segments received") => "TcpInSegs",
        ("Tcp", "segments sent out") | ("Tcp", "segments send out") => "TcpOutSegs",
        ("Tcp", "segments retransmitted") | ("Tcp", "segments retransmited") => "TcpRetransSegs",
        ("Tcp", "bad segments received") | ("Tcp", "bad segments received.") => "TcpInErrs",
        ("Tcp", "resets sent") => "TcpOutRsts",
        ("TcpExt", "other TCP timeouts") => "TcpExtTCPTimeouts",
        ("TcpExt", "fast retransmits") => "TcpExtTCPFastRetrans",
        ("TcpExt", "retransmits in slow start") => "TcpExtTCPSlowStartRetrans",
        ("TcpExt", "TCP data loss events") => "TcpExtTCPLossFailures",
        ("TcpExt", "timeouts after SACK recovery") => "TcpExtTCPSackFailures",
        ("TcpExt", "packets pruned from receive queue because of socket buffer overrun") => "TcpExtPruneCalled",
        ("TcpExt", "packets collapsed in receive queue due to low socket buffer") => "TcpExtTCPRcvCollapsed",
        ("TcpExt", "times the listen queue of a socket overflowed") => "TcpExtListenOverflows",
        ("TcpExt", "SYNs to LISTEN sockets dropped") | ("TcpExt", "SYNs to LISTEN sockets ignored") => "TcpExtListenDrops",
        ("TcpExt", "packets dropped from out-of-order queue because of socket buffer overrun") => "TcpExtOfoPruned",
        ("TcpExt", "packets rejects in established connections because of timestamp") => "TcpExtPAWSEstab",
        _ => return None,
    })
}

/// The live counters of the calling thread's network namespace, from
/// /proc/thread-self/net (/proc/net follows the process's main thread).
pub fn read_proc_counters() -> std::io::Result<Counters> {
    let base = if std::path::Path::new("/proc/thread-self/net").exists() { "/proc/thread-self/net" } else { "/proc/net" };
    let mut text = std::fs::read_to_string(format!("{base}/snmp"))?;
    text.push('\n');
    text += &std::fs::read_to_string(format!("{base}/netstat"))?;
    Ok(parse_counters(&text).0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctl_text() {
        let m = parse_sysctl("net.ipv4.tcp_rmem = 4096\t131072\t6291456\nsysctl: permission denied on key 'x'\nkernel.osrelease = 6.1.0\n");
        assert_eq!(m["net.ipv4.tcp_rmem"], "4096 131072 6291456");
        assert_eq!(m["kernel.osrelease"], "6.1.0");
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn tcp_metrics_text() {
        let (v, skipped) = parse_tcp_metrics(
            "10.0.0.2 age 14.312sec ssthresh 4 cwnd 2 rtt 68750us rttvar 37500us source 10.0.0.1\n\
             192.168.1.7 age 3.1sec rtt 12ms rttvar 6ms source 192.168.1.2\n\
             fe80::1 age 1.000sec tw_ts 123 tw_ts_stamp 3sec rtt 1000us rttvar 500us fo_mss 1400 fo_syn_drops 1/20ms ago source fe80::2\n\
             Error: no metrics\n",
        );
        assert_eq!(v.len(), 3);
        assert_eq!(skipped.len(), 1);
        assert_eq!((v[0].ssthresh, v[0].cwnd, v[0].rtt_us), (Some(4), Some(2), Some(68750)));
        assert_eq!(v[1].rtt_us, Some(12000));
        assert_eq!(v[2].source.as_deref(), Some("fe80::2"));
    }

    #[test]
    fn counters_all_formats() {
        let (c, _) = parse_counters("#kernel\nTcpRetransSegs   12   0.0\nTcpExtTCPLossProbes  5  0.0\n");
        assert_eq!(c["TcpExtTCPLossProbes"], 5);
        let (c, _) = parse_counters("Tcp:\n    100 segments sent out\n    3 segments retransmitted\nTcpExt:\n    TCPLossProbes: 7\n    2 other TCP timeouts\n");
        assert_eq!((c["TcpOutSegs"], c["TcpRetransSegs"], c["TcpExtTCPLossProbes"], c["TcpExtTCPTimeouts"]), (100, 3, 7, 2));
        let (c, _) = parse_counters("TcpExt: SyncookiesSent TCPLossProbes\nTcpExt: 0 9\n");
        assert_eq!(c["TcpExtTCPLossProbes"], 9);
    }
}
