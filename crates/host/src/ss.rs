//! Saved `ss -tin` / `ss -tinm` / `ss -tinoe` text into [`SocketSample`]s.
//!
//! One socket is a header line (`State Recv-Q Send-Q Local Peer [extras]`,
//! the State column absent when ss was given a `state` filter) and, with
//! `-i`/`-m`, one indented line of `key:value` tokens (`rtt:0.054/0.046`,
//! `cwnd:10`, `skmem:(r0,rb131072,...)`, `busy:736ms`,
//! `rwnd_limited:736ms(100.0%)`, `bbr:(bw:...,mrtt:...)` ...).
//!
//! Many snapshots in one file (from `watch -n 0.1 ss -4tni`, `while :; do
//! date +%s.%N; ss -tinm; sleep 0.1; done`, `ts`-prefixed lines...) become
//! one series: a snapshot starts at a timestamp line (`1700000000.123`,
//! `date` output, watch's `Every 0.1s: ... Sun Nov 22 03:37:45 2026`, ISO
//! 8601) or at ss's own `State Recv-Q ...` header. Without any timestamp,
//! snapshots are spaced by the interval the caller gives.
//!
//! Units follow `struct tcp_info`: ss's milliseconds become µs, its bit/s
//! rates become bytes/s. Fields ss derives (`send`, the `%` of
//! busy) are recomputed, not stored; anything not understood is listed in
//! [`SsParse::skipped`] with a count, never silently dropped.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use tcpwhy_kernel::sockdiag::{BbrInfo, CongName, DctcpInfo, SkMemInfo, SocketSample};
use tcpwhy_kernel::TcpInfo;

/// The result of reading ss text.
#[derive(Debug, Default)]
pub struct SsParse {
    pub samples: Vec<SocketSample>,
    /// Number of snapshots seen.
    pub snapshots: usize,
    /// Whether the snapshots carried their own timestamps.
    pub timestamped: bool,
    /// What was skipped, with counts ("token 'foo:1' (unknown field)": 3).
    pub skipped: BTreeMap<String, usize>,
}

const TCPI_OPT_TIMESTAMPS: u8 = 1;
const TCPI_OPT_SACK: u8 = 2;
const TCPI_OPT_WSCALE: u8 = 4;
const TCPI_OPT_ECN: u8 = 8;
const TCPI_OPT_ECN_SEEN: u8 = 16;
const TCPI_OPT_SYN_DATA: u8 = 32;

const CONG_NAMES: &[&str] = &[
    "cubic", "reno", "bbr", "bbr2", "bbr3", "dctcp", "vegas", "westwood", "htcp", "illinois",
    "hybla", "scalable", "highspeed", "lp", "veno", "yeah", "bic", "cdg", "nv", "prague",
];

fn state_number(s: &str) -> Option<u8> {
    Some(match s {
        "ESTAB" | "ESTABLISHED" => 1,
        "SYN-SENT" => 2,
        "SYN-RECV" => 3,
        "FIN-WAIT-1" => 4,
        "FIN-WAIT-2" => 5,
        "TIME-WAIT" => 6,
        "UNCONN" | "CLOSE" => 7,
        "CLOSE-WAIT" => 8,
        "LAST-ACK" => 9,
        "LISTEN" => 10,
        "CLOSING" => 11,
        _ => return None,
    })
}

/// ss's address forms: `1.2.3.4:80`, `[::1]:80`, `::1:80` (old ss),
/// `1.2.3.4%eth0:80`, `[fe80::1%eth0]:80`, `*:*`.
pub fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (host, port) = s.rsplit_once(':')?;
    let port: u16 = if port == "*" { 0 } else { port.parse().ok()? };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = host.split('%').next()?;
    let host = if host == "*" { "0.0.0.0" } else { host };
    let host = host.strip_prefix("::ffff:").filter(|h| h.contains('.')).unwrap_or(host);
    let ip: IpAddr = host.parse().ok()?;
    Some(SocketAddr::new(ip, port))
}

/// "70542222222bps", "1.9Gbps", "512Kbps", "0bps" -> bit/s.
fn parse_bps(s: &str) -> Option<f64> {
    let t = s.strip_suffix("bps")?;
    let (num, mult) = match t.chars().last()? {
        'K' | 'k' => (&t[..t.len() - 1], 1e3),
        'M' => (&t[..t.len() - 1], 1e6),
        'G' => (&t[..t.len() - 1], 1e9),
        'T' => (&t[..t.len() - 1], 1e12),
        _ => (t, 1.0),
    };
    Some(num.parse::<f64>().ok()? * mult)
}

/// "0.054" (ms) -> µs.
fn ms_to_us(s: &str) -> Option<u32> {
    let v: f64 = s.trim_end_matches("ms").parse().ok()?;
    Some((v * 1000.0).round() as u32)
}

/// "736ms" or "736ms(100.0%)" -> µs.
fn ms_field_us(s: &str) -> Option<u64> {
    let v = s.split('(').next()?.strip_suffix("ms")?;
    Some((v.parse::<f64>().ok()? * 1000.0).round() as u64)
}

/// A timestamp line, as ns since the epoch (local time read as UTC: only
/// differences matter). None if the line is not a timestamp.
pub fn parse_timestamp_line(line: &str) -> Option<u64> {
    let l = line.trim();
    if l.is_empty() {
        return None;
    }
    // Epoch seconds, e.g. `date +%s.%N`.
    if l.chars().all(|c| c.is_ascii_digit() || c == '.') && l.len() >= 9 {
        let v: f64 = l.parse().ok()?;
        if v > 1e8 {
            return Some((v * 1e9) as u64);
        }
    }
    // watch header: "Every 0.1s: ss -4tni        host: Sun Nov 22 03:37:45 2026"
    if l.starts_with("Every ") {
        let words: Vec<&str> = l.split_whitespace().collect();
        for i in 0..words.len() {
            if let Some(t) = parse_date_words(&words[i..]) {
                return Some(t);
            }
        }
        return None;
    }
    // `date`: "Sun Nov 22 03:37:45 UTC 2026"; ISO 8601.
    let words: Vec<&str> = l.split_whitespace().collect();
    if let Some(t) = parse_date_words(&words) {
        return Some(t);
    }
    parse_iso(l)
}

fn month(m: &str) -> Option<u32> {
    let ms = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    let m = m.to_ascii_lowercase();
    ms.iter().position(|x| m.starts_with(x)).map(|i| i as u32 + 1)
}

/// "Sun Nov 22 03:37:45 [UTC] 2026" (the whole word list).
fn parse_date_words(w: &[&str]) -> Option<u64> {
    if !(5..=6).contains(&w.len()) {
        return None;
    }
    let weekdays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
    if !weekdays.iter().any(|d| w[0].to_ascii_lowercase().starts_with(d)) {
        return None;
    }
    let mo = month(w[1])?;
    let day: u32 = w[2].parse().ok()?;
    let secs = hms(w[3])?;
    let year: i64 = w[w.len() - 1].parse().ok()?;
    Some(epoch_ns(year, mo, day, secs))
}

fn hms(s: &str) -> Option<f64> {
    let mut it = s.split(':');
    let h: f64 = it.next()?.parse().ok()?;
    let m: f64 = it.next()?.parse().ok()?;
    let sec: f64 = it.next().unwrap_or("0").parse().ok()?;
    if it.next().is_some() || h >= 24.0 || m >= 60.0 || sec >= 61.0 {
        return None;
    }
    Some(h * 3600.0 + m * 60.0 + sec)
}

/// "2026-11-22T03:37:45.123+00:00", "2026-11-22 03:37:45.123" (a line that
/// is only that).
fn parse_iso(l: &str) -> Option<u64> {
    let b = l.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !(b[10] == b'T' || b[10] == b' ') {
        return None;
    }
    let year: i64 = l[0..4].parse().ok()?;
    let mo: u32 = l[5..7].parse().ok()?;
    let day: u32 = l[8..10].parse().ok()?;
    let rest = &l[11..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.' || c == ','))
        .unwrap_or(rest.len());
    let tail = rest[end..].trim();
    if !(tail.is_empty() || tail.starts_with(['+', '-', 'Z']) || tail.chars().all(|c| c.is_ascii_alphabetic())) {
        return None;
    }
    let secs = hms(&rest[..end].replace(',', "."))?;
    Some(epoch_ns(year, mo, day, secs))
}

fn epoch_ns(year: i64, mo: u32, day: u32, secs: f64) -> u64 {
    // Days from civil (Howard Hinnant).
    let y = if mo <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = mo as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    let base = (days.max(0) as u64) * 86_400_000_000_000;
    base + (secs * 1e9).round() as u64
}

fn is_header(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("State ") || t.starts_with("Recv-Q ") || t.starts_with("Netid ")
}

/// Parse ss text. `interval_s` spaces untimed snapshots (0 = all at t=0).
pub fn parse(text: &str, interval_s: f64) -> SsParse {
    let mut out = SsParse::default();
    let mut snap_time: Option<u64> = None;
    let mut snap_index: usize = 0;
    let mut any_ts = false;
    // The snapshot the current socket lines belong to has been counted.
    let mut snapshot_open = false;
    let mut pending_ts_for_next = false;
    let mut cur: Option<SocketSample> = None;
    let skip = |out: &mut SsParse, what: String| *out.skipped.entry(what).or_insert(0) += 1;

    let flush = |cur: &mut Option<SocketSample>, out: &mut SsParse| {
        if let Some(s) = cur.take() {
            out.samples.push(s);
        }
    };

    for raw in text.lines() {
        let line = raw.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        if let Some(t) = parse_timestamp_line(line) {
            flush(&mut cur, &mut out);
            snap_time = Some(t);
            any_ts = true;
            snap_index += 1;
            snapshot_open = true;
            pending_ts_for_next = true;
            continue;
        }
        if is_header(line) {
            flush(&mut cur, &mut out);
            if pending_ts_for_next {
                // The header right after a timestamp belongs to it.
                pending_ts_for_next = false;
            } else {
                snap_index += 1;
                snapshot_open = true;
                if any_ts {
                    // A header without its own timestamp after timed ones.
                    snap_time = None;
                }
            }
            continue;
        }
        let indented = raw.starts_with([' ', '\t']);
        if indented && cur.is_some() {
            if let Some(s) = cur.as_mut() {
                parse_info_line(line, s, &mut out.skipped);
            }
            continue;
        }
        // A socket line.
        flush(&mut cur, &mut out);
        if !snapshot_open {
            snap_index += 1;
            snapshot_open = true;
        }
        pending_ts_for_next = false;
        let t_ns = match snap_time {
            Some(t) => t,
            None => ((snap_index.saturating_sub(1)) as f64 * interval_s * 1e9) as u64,
        };
        let s = match socket_line(line, t_ns, &mut out.skipped) {
            Ok(s) => s,
            Err(why) => {
                skip(&mut out, why);
                continue;
            }
        };
        cur = Some(s);
    }
    flush(&mut cur, &mut out);
    out.snapshots = snap_index;
    out.timestamped = any_ts;
    out
}

/// One socket's line of `ss` output, sampled at `t_ns`: its state, queues,
/// addresses, and the `-o`/`-e`/`-p` extras on the line; Err: why it was
/// skipped.
fn socket_line(line: &str, t_ns: u64, skipped: &mut BTreeMap<String, usize>) -> Result<SocketSample, String> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    let mut i = 0;
    if toks.first().is_some_and(|t| *t == "tcp" || *t == "tcp6" || *t == "mptcp") {
        i += 1;
    }
    let state = match toks.get(i).and_then(|t| state_number(t)) {
        Some(s) => {
            i += 1;
            s
        }
        None => 1, // `ss -tin state established`: no State column
    };
    let (Some(rq), Some(wq), Some(l), Some(p)) = (
        toks.get(i).and_then(|t| t.parse::<u32>().ok()),
        toks.get(i + 1).and_then(|t| t.parse::<u32>().ok()),
        toks.get(i + 2),
        toks.get(i + 3),
    ) else {
        return Err(format!("line not understood: {:.60}", line.trim()));
    };
    let (Some(src), Some(dst)) = (parse_addr(l), parse_addr(p)) else {
        return Err("socket with a non-numeric address (save ss output with -n)".into());
    };
    let mut s = SocketSample {
        time_ns: t_ns,
        mono_ns: t_ns,
        family: if src.is_ipv4() { 2 } else { 10 },
        state,
        src,
        dst,
        ifindex: 0,
        uid: 0,
        inode: 0,
        cookie: 0,
        rqueue: rq,
        wqueue: wq,
        timer: 0,
        retrans: 0,
        expires_ms: 0,
        tcp_info: None,
        cong: None,
        skmem: None,
        bbr: None,
        vegas: None,
        dctcp: None,
        shutdown: None,
        tos: None,
        mark: None,
    };
    // -o / -e / -p extras on the same line.
    for t in &toks[i + 4..] {
        parse_extra(t, &mut s, skipped);
    }
    Ok(s)
}

fn parse_extra(t: &str, s: &mut SocketSample, skipped: &mut BTreeMap<String, usize>) {
    if let Some(v) = t.strip_prefix("timer:(") {
        // timer:(on,200ms,0) / (persist,132ms,0) / (keepalive,...)
        let parts: Vec<&str> = v.trim_end_matches(')').split(',').collect();
        s.timer = match parts.first().copied() {
            Some("on") => 1,
            Some("keepalive") => 2,
            Some("timewait") => 3,
            Some("persist") => 4,
            _ => 0,
        };
        if let Some(ms) = parts.get(1) {
            s.expires_ms = parse_timer_ms(ms).unwrap_or(0);
        }
        s.retrans = parts.get(2).and_then(|r| r.parse().ok()).unwrap_or(0);
    } else if let Some(v) = t.strip_prefix("ino:") {
        s.inode = v.parse().unwrap_or(0);
    } else if let Some(v) = t.strip_prefix("uid:") {
        s.uid = v.parse().unwrap_or(0);
    } else if let Some(v) = t.strip_prefix("sk:") {
        s.cookie = u64::from_str_radix(v, 16).unwrap_or(0);
    } else if t.starts_with("users:") || t.starts_with("cgroup:") || t == "<->" || t == "-->" || t == "<--" || t == "---" || t.starts_with("fwmark:") || t.starts_with("v6only:") || t.starts_with("dev:") {
        // process, cgroup, shutdown arrows: nothing tcp_info holds (except shutdown)
        match t {
            "-->" => s.shutdown = Some(1),
            "<--" => s.shutdown = Some(2),
            "---" => s.shutdown = Some(3),
            "<->" => s.shutdown = Some(0),
            _ => {}
        }
    } else {
        *skipped
            .entry(format!("socket-line token '{}'", token_name(t)))
            .or_insert(0) += 1;
    }
}

fn parse_timer_ms(s: &str) -> Option<u32> {
    // "132ms", "1min12sec", "2.5sec"
    if let Some(v) = s.strip_suffix("ms") {
        return v.parse().ok();
    }
    if let Some(v) = s.strip_suffix("sec") {
        if let Some((m, sec)) = v.split_once("min") {
            return Some(m.parse::<u32>().ok()? * 60_000 + (sec.parse::<f64>().ok()? * 1000.0) as u32);
        }
        return Some((v.parse::<f64>().ok()? * 1000.0) as u32);
    }
    None
}

fn token_name(t: &str) -> &str {
    t.split([':', '(']).next().unwrap_or(t)
}

fn skmem(v: &str) -> Option<SkMemInfo> {
    let inner = v.strip_prefix('(')?.strip_suffix(')')?;
    let mut m = SkMemInfo::default();
    for part in inner.split(',') {
        let key_end = part.find(|c: char| c.is_ascii_digit())?;
        let (k, n) = part.split_at(key_end);
        let n: u32 = n.parse().ok()?;
        match k {
            "r" => m.rmem_alloc = n,
            "rb" => m.rcvbuf = n,
            "t" => m.wmem_alloc = n,
            "tb" => m.sndbuf = n,
            "f" => m.fwd_alloc = n,
            "w" => m.wmem_queued = n,
            "o" => m.optmem = n,
            "bl" => m.backlog = Some(n),
            "d" => m.drops = Some(n),
            _ => {}
        }
    }
    Some(m)
}

/// Split an info line into tokens, keeping `(...)` groups together.
fn tokens(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0;
    for c in line.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c)
            }
            ')' => {
                depth -= 1;
                cur.push(c)
            }
            c if c.is_whitespace() && depth <= 0 => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn parse_info_line(line: &str, s: &mut SocketSample, skipped: &mut BTreeMap<String, usize>) {
    let mut ti = s.tcp_info.take().unwrap_or_default();
    let toks = tokens(line);
    let mut i = 0;
    let mut skip = |what: &str, why: &str| {
        *skipped.entry(format!("'{what}' ({why})")).or_insert(0) += 1;
    };
    while i < toks.len() {
        let t = toks[i].as_str();
        i += 1;
        if parse_word(t, &toks, &mut i, &mut ti, s) {
            continue;
        }
        let Some((k, v)) = t.split_once(':') else {
            if !t.is_empty() && t.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') && !t.chars().all(|c| c.is_ascii_digit()) {
                // An unlisted congestion control name (it stands alone).
                s.cong = Some(CongName::from_bytes(t.as_bytes()));
            } else {
                skip(t, "not a key:value");
            }
            continue;
        };
        if !parse_field(k, v, &mut ti, s, &mut skip) {
            skip(t, "value not understood");
        }
    }
    ti.state = s.state;
    if ti.busy_time.is_some() {
        // ss prints rwnd_limited / sndbuf_limited only when non-zero.
        ti.rwnd_limited.get_or_insert(0);
        ti.sndbuf_limited.get_or_insert(0);
    }
    s.tcp_info = Some(ti);
}

/// A token that is not `key:value`: a word with its value in the next
/// token (`pacing_rate 1Mbps`, old DCTCP), an option flag or a known
/// congestion control name. Returns whether `t` was one; `i` moves past
/// any value it took.
fn parse_word(t: &str, toks: &[String], i: &mut usize, ti: &mut TcpInfo, s: &mut SocketSample) -> bool {
    // Words followed by a separate value.
    match t {
        "send" | "pacing_rate" | "delivery_rate" => {
            // No value left: the line ends here.
            let Some(v) = toks.get(*i) else { return true };
            *i += 1;
            let (rate, max) = match v.split_once('/') {
                Some((a, b)) => (parse_bps(a), parse_bps(b)),
                None => (parse_bps(v), None),
            };
            match t {
                "send" => {} // cwnd*mss/rtt, recomputed when needed
                "pacing_rate" => {
                    ti.pacing_rate = rate.map(|r| (r / 8.0) as u64);
                    ti.max_pacing_rate = max.map(|r| (r / 8.0) as u64);
                }
                _ => ti.delivery_rate = rate.map(|r| (r / 8.0) as u64),
            }
            return true;
        }
        // iproute2 4.3-4.5 printed DCTCP as bare words.
        "ce_state" | "alpha" | "ab_ecn" | "ab_tot" => {
            let v: u32 = toks.get(*i).and_then(|v| v.parse().ok()).unwrap_or(0);
            *i += 1;
            let d = s.dctcp.get_or_insert(DctcpInfo { enabled: 1, ..Default::default() });
            match t {
                "ce_state" => d.ce_state = v as u16,
                "alpha" => d.alpha = v,
                "ab_ecn" => d.ab_ecn = v,
                _ => d.ab_tot = v,
            }
            return true;
        }
        "fallback_mode" | "dctcp:fallback_mode" => {
            s.dctcp = Some(DctcpInfo::default());
            return true;
        }
        "ts" => ti.options |= TCPI_OPT_TIMESTAMPS,
        "sack" => ti.options |= TCPI_OPT_SACK,
        "ecn" => ti.options |= TCPI_OPT_ECN,
        "ecnseen" => ti.options |= TCPI_OPT_ECN_SEEN,
        "fastopen" => ti.options |= TCPI_OPT_SYN_DATA,
        "app_limited" => ti.delivery_rate_app_limited = true,
        _ => {}
    }
    if matches!(t, "ts" | "sack" | "ecn" | "ecnseen" | "fastopen" | "app_limited") {
        return true;
    }
    if CONG_NAMES.contains(&t) {
        s.cong = Some(CongName::from_bytes(t.as_bytes()));
        return true;
    }
    false
}

/// One `key:value` token into `struct tcp_info` units (ms -> µs, bit/s ->
/// bytes/s) or the sample. Returns false when the value is not understood;
/// a key tcpwhy does not use is counted in `skip` and returns true.
fn parse_field(k: &str, v: &str, ti: &mut TcpInfo, s: &mut SocketSample, skip: &mut impl FnMut(&str, &str)) -> bool {
    let u32v = || v.parse::<u32>().ok();
    let u64v = || v.parse::<u64>().ok();
    match k {
        "skmem" => skmem(v).map(|m| s.skmem = Some(m)).is_some(),
        // ss before 3.x-era skmem: mem:(r0,w0,f0,t0)
        "mem" => old_mem(v).map(|m| s.skmem = Some(m)).is_some(),
        "wscale" => v
            .split_once(',')
            .and_then(|(a, b)| Some((a.parse::<u8>().ok()?, b.parse::<u8>().ok()?)))
            .map(|(a, b)| {
                ti.snd_wscale = a;
                ti.rcv_wscale = b;
                ti.options |= TCPI_OPT_WSCALE;
            })
            .is_some(),
        "rto" => ms_to_us(v).map(|x| ti.rto = x).is_some(),
        "backoff" => u32v().map(|x| ti.backoff = x.min(255) as u8).is_some(),
        "rtt" => v
            .split_once('/')
            .and_then(|(a, b)| Some((ms_to_us(a)?, ms_to_us(b)?)))
            .map(|(a, b)| {
                ti.rtt = a;
                ti.rttvar = b;
            })
            .is_some(),
        "ato" => ms_to_us(v).map(|x| ti.ato = x).is_some(),
        "mss" => u32v().map(|x| ti.snd_mss = x).is_some(),
        "pmtu" => u32v().map(|x| ti.pmtu = x).is_some(),
        "rcvmss" => u32v().map(|x| ti.rcv_mss = x).is_some(),
        "advmss" => u32v().map(|x| ti.advmss = x).is_some(),
        "cwnd" => u32v().map(|x| ti.snd_cwnd = x).is_some(),
        "ssthresh" => u32v().map(|x| ti.snd_ssthresh = x).is_some(),
        "bytes_sent" => u64v().map(|x| ti.bytes_sent = Some(x)).is_some(),
        "bytes_retrans" => u64v().map(|x| ti.bytes_retrans = Some(x)).is_some(),
        "bytes_acked" => u64v().map(|x| ti.bytes_acked = Some(x)).is_some(),
        "bytes_received" => u64v().map(|x| ti.bytes_received = Some(x)).is_some(),
        "segs_out" => u32v().map(|x| ti.segs_out = Some(x)).is_some(),
        "segs_in" => u32v().map(|x| ti.segs_in = Some(x)).is_some(),
        "data_segs_out" => u32v().map(|x| ti.data_segs_out = Some(x)).is_some(),
        "data_segs_in" => u32v().map(|x| ti.data_segs_in = Some(x)).is_some(),
        "lastsnd" => u32v().map(|x| ti.last_data_sent = x).is_some(),
        "lastrcv" => u32v().map(|x| ti.last_data_recv = x).is_some(),
        "lastack" => u32v().map(|x| ti.last_ack_recv = x).is_some(),
        "delivered" => u32v().map(|x| ti.delivered = Some(x)).is_some(),
        "delivered_ce" => u32v().map(|x| ti.delivered_ce = Some(x)).is_some(),
        "busy" => ms_field_us(v).map(|x| ti.busy_time = Some(x)).is_some(),
        "rwnd_limited" => ms_field_us(v).map(|x| ti.rwnd_limited = Some(x)).is_some(),
        "sndbuf_limited" => ms_field_us(v).map(|x| ti.sndbuf_limited = Some(x)).is_some(),
        "unacked" => u32v().map(|x| ti.unacked = x).is_some(),
        "retrans" => v
            .split_once('/')
            .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
            .map(|(a, b)| {
                ti.retrans = a;
                ti.total_retrans = b;
            })
            .is_some(),
        "lost" => u32v().map(|x| ti.lost = x).is_some(),
        "sacked" => u32v().map(|x| ti.sacked = x).is_some(),
        "fackets" => u32v().map(|x| ti.fackets = x).is_some(),
        "reordering" => u32v().map(|x| ti.reordering = x).is_some(),
        "reord_seen" => u32v().map(|x| ti.reord_seen = Some(x)).is_some(),
        "dsack_dups" => u32v().map(|x| ti.dsack_dups = Some(x)).is_some(),
        "rcv_rtt" => ms_to_us(v).map(|x| ti.rcv_rtt = x).is_some(),
        "rcv_space" => u32v().map(|x| ti.rcv_space = x).is_some(),
        "rcv_ssthresh" => u32v().map(|x| ti.rcv_ssthresh = x).is_some(),
        "notsent" => u32v().map(|x| ti.notsent_bytes = Some(x)).is_some(),
        "minrtt" => ms_to_us(v).map(|x| ti.min_rtt = Some(x)).is_some(),
        "snd_wnd" => u32v().map(|x| ti.snd_wnd = Some(x)).is_some(),
        "rcv_wnd" => u32v().map(|x| ti.rcv_wnd = Some(x)).is_some(),
        "rehash" => u32v().map(|x| ti.rehash = Some(x)).is_some(),
        "rcv_ooopack" => u32v().map(|x| ti.rcv_ooopack = Some(x)).is_some(),
        "probes" => u32v().map(|x| ti.probes = x.min(255) as u8).is_some(),
        "bbr" => bbr(v).map(|b| s.bbr = Some(b)).is_some(),
        "dctcp" => dctcp(v).map(|d| s.dctcp = Some(d)).is_some(),
        "tos" => u32v().map(|x| s.tos = Some(x as u8)).is_some(),
        _ => {
            skip(k, "field tcpwhy does not use");
            true
        }
    }
}

fn old_mem(v: &str) -> Option<SkMemInfo> {
    let inner = v.strip_prefix('(')?.strip_suffix(')')?;
    let mut m = SkMemInfo::default();
    for part in inner.split(',') {
        if part.is_empty() || !part.is_char_boundary(1) {
            return None;
        }
        let (k, n) = part.split_at(1);
        let n: u32 = n.parse().ok()?;
        match k {
            "r" => m.rmem_alloc = n,
            "w" => m.wmem_queued = n,
            "f" => m.fwd_alloc = n,
            "t" => m.wmem_alloc = n,
            _ => {}
        }
    }
    Some(m)
}

fn bbr(v: &str) -> Option<BbrInfo> {
    let inner = v.strip_prefix('(')?.strip_suffix(')')?;
    let mut b = BbrInfo::default();
    for part in inner.split(',') {
        let (k, val) = part.split_once(':')?;
        match k {
            "bw" => b.bw = (parse_bps(val)? / 8.0) as u64,
            "mrtt" => b.min_rtt = ms_to_us(val)?,
            "pacing_gain" => b.pacing_gain = (val.parse::<f64>().ok()? * 256.0).round() as u32,
            "cwnd_gain" => b.cwnd_gain = (val.parse::<f64>().ok()? * 256.0).round() as u32,
            _ => {}
        }
    }
    Some(b)
}

fn dctcp(v: &str) -> Option<DctcpInfo> {
    let inner = v.strip_prefix('(')?.strip_suffix(')')?;
    let mut d = DctcpInfo::default();
    for part in inner.split(',') {
        match part.split_once(':') {
            Some(("ce_state", x)) => d.ce_state = x.parse().ok()?,
            Some(("alpha", x)) => d.alpha = x.parse().ok()?,
            Some(("ab_ecn", x)) => d.ab_ecn = x.parse().ok()?,
            Some(("ab_tot", x)) => d.ab_tot = x.parse().ok()?,
            _ => {} // "fallback_mode"
        }
    }
    d.enabled = 1;
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SS_6_1: &str = "State Recv-Q Send-Q  Local Address:Port  Peer Address:Port Process
ESTAB 0      2558976     127.0.0.1:33772    127.0.0.1:5001
\t skmem:(r0,rb131072,t0,tb2626560,f1984,w2603072,o0,bl0,d0) cubic wscale:10,10 rto:204 rtt:0.054/0.046 mss:47616 pmtu:65535 rcvmss:536 advmss:65483 cwnd:10 bytes_sent:161280 bytes_acked:161281 segs_out:9 segs_in:9 data_segs_out:7 send 70542222222bps lastsnd:76 lastrcv:736 lastack:60 pacing_rate 138834806376bps delivery_rate 14108444440bps delivered:8 busy:736ms rwnd_limited:736ms(100.0%) rcv_space:65495 rcv_ssthresh:65495 notsent:2558976 minrtt:0.026 snd_wnd:16384
ESTAB 0      0           127.0.0.1:5001     127.0.0.1:33772
\t skmem:(r0,rb16384,t0,tb3939840,f0,w0,o0,bl0,d0) bbr wscale:10,10 rto:204 rtt:0.026/0.013 ato:40 mss:32768 pmtu:65535 rcvmss:16384 advmss:65483 cwnd:10 bytes_received:161280 segs_out:8 segs_in:9 data_segs_in:7 bbr:(bw:0bps,mrtt:0.026) send 100824615385bps lastsnd:736 lastrcv:76 lastack:76 pacing_rate 288141767440bps delivered:1 app_limited rcv_rtt:0.05 rcv_space:65483 rcv_ssthresh:95232 minrtt:0.026 snd_wnd:65536
";

    #[test]
    fn parses_iproute2_6_1() {
        let p = parse(SS_6_1, 0.0);
        assert_eq!(p.samples.len(), 2, "{p:?}");
        assert!(p.skipped.is_empty(), "{:?}", p.skipped);
        let s = &p.samples[0];
        assert_eq!(s.src, "127.0.0.1:33772".parse().unwrap());
        assert_eq!(s.wqueue, 2558976);
        assert_eq!(s.cong_name(), Some("cubic"));
        let m = s.skmem.unwrap();
        assert_eq!((m.rcvbuf, m.sndbuf, m.wmem_queued), (131072, 2626560, 2603072));
        let t = s.tcp_info.unwrap();
        assert_eq!((t.rtt, t.rttvar, t.rto), (54, 46, 204_000));
        assert_eq!(t.snd_cwnd, 10);
        assert_eq!(t.busy_time, Some(736_000));
        assert_eq!(t.rwnd_limited, Some(736_000));
        assert_eq!(t.delivery_rate, Some(14108444440 / 8));
        assert_eq!(t.snd_wnd, Some(16384));
        assert_eq!(t.notsent_bytes, Some(2558976));
        let r = p.samples[1].tcp_info.unwrap();
        assert!(r.delivery_rate_app_limited);
        assert_eq!(p.samples[1].bbr.unwrap().min_rtt, 26);
    }

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("[::1]:80").unwrap(), "[::1]:80".parse().unwrap());
        assert_eq!(parse_addr("::1:80").unwrap(), "[::1]:80".parse().unwrap());
        assert_eq!(parse_addr("[::ffff:10.0.0.1]:22").unwrap(), "10.0.0.1:22".parse().unwrap());
        assert_eq!(parse_addr("10.0.0.1%eth0:53").unwrap(), "10.0.0.1:53".parse().unwrap());
        assert!(parse_addr("localhost:ssh").is_none());
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp_line("1700000000.5"), Some(1_700_000_000_500_000_000));
        let a = parse_timestamp_line("Every 0.1s: ss -4tni      host: Sun Nov 22 03:37:45 2026").unwrap();
        let b = parse_timestamp_line("Sun Nov 22 03:37:46 UTC 2026").unwrap();
        assert_eq!(b - a, 1_000_000_000);
        let c = parse_timestamp_line("2026-11-22T03:37:46.250+00:00").unwrap();
        assert_eq!(c - b, 250_000_000);
        assert_eq!(parse_timestamp_line("ESTAB 0 0 1.2.3.4:5 6.7.8.9:10"), None);
        assert_eq!(parse_timestamp_line("12345"), None);
    }

    #[test]
    fn snapshots_from_a_loop() {
        let text = format!("1700000000.0\n{SS_6_1}1700000000.1\n{SS_6_1}");
        let p = parse(&text, 0.0);
        assert_eq!(p.snapshots, 2);
        assert!(p.timestamped);
        assert_eq!(p.samples.len(), 4);
        assert_eq!(p.samples[2].time_ns - p.samples[0].time_ns, 100_000_000);
        // Untimed: spaced by the interval.
        let p = parse(&format!("{SS_6_1}{SS_6_1}"), 0.5);
        assert_eq!(p.snapshots, 2);
        assert_eq!(p.samples[2].time_ns, 500_000_000);
    }

    #[test]
    fn garbage_is_noted_not_fatal() {
        let p = parse("hello world\n\tfoo\nESTAB 0 0 a b\n", 0.0);
        assert!(p.samples.is_empty());
        assert!(!p.skipped.is_empty());
    }
}
