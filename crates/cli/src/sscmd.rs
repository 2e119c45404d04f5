//! `tcpwhy ss FILE...`: saved `ss -tin(m)` output (one or many snapshots),
//! or a `tcpwhy live --record` / lab samples file, into the same series and
//! diagnosis as `tcpwhy live`.

use clap::Args;
use std::path::PathBuf;
use tcpwhy_host::series;
use crate::quantity::seconds;

pub const SS_AFTER_HELP: &str = "\
Reads what `ss -tin`, `ss -tinm`, `ss -tinoe` print (any iproute2 version),
one snapshot or many: from `watch -n 0.1 ss -4tni` (the watch header carries
the time), a loop such as
  while :; do date +%s.%N; ss -tinm; sleep 0.1; done > ss.txt
or ISO/`date` timestamp lines between snapshots. Without timestamps the
snapshots are spaced by --interval. JSON Lines from `tcpwhy live --record`
or a lab run's *.samples.jsonl are read too.

Every field ss prints is taken into tcp_info units (rtt, cwnd, ssthresh,
bytes_*, retrans, delivery_rate, pacing_rate, busy, rwnd_limited,
sndbuf_limited, app_limited, notsent, skmem, bbr/dctcp details...); derived
values (`send`, percentages) are recomputed; anything else is listed on
stderr as skipped with a count. Save ss output with -n (numeric addresses).

Exit codes: 0 read; 2 usage error; 3 a file could not be read or held no sockets.";

#[derive(Args)]
pub struct SsArgs {
    /// Files with saved ss output (or sample JSON Lines).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Spacing of snapshots that carry no timestamp (e.g. 0.1s).
    #[arg(long, default_value = "1s", value_parser = seconds, value_name = "TIME")]
    pub interval: f64,
    /// Print the diagnosis as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print the parsed samples as JSON Lines instead of the diagnosis.
    #[arg(long)]
    pub samples: bool,
    /// Connections to print (largest first).
    #[arg(long, default_value_t = 20)]
    pub top: usize,
}

pub fn run(a: &SsArgs) -> u8 {
    let mut all = Vec::new();
    for p in &a.files {
        let text = match std::fs::read_to_string(p) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("tcpwhy ss: cannot read {}: {e}", p.display());
                return crate::exit::UNREADABLE;
            }
        };
        if text.trim_start().starts_with('{') {
            let mut notes = Vec::new();
            match tcpwhy_host::evidence::load_samples(p, &mut notes) {
                Ok(v) => all.extend(v),
                Err(e) => {
                    eprintln!("tcpwhy ss: {e}");
                    return crate::error::ToExitCode::exit_code(&e);
                }
            }
            for n in notes {
                eprintln!("tcpwhy ss: {n}");
            }
            continue;
        }
        let parsed = tcpwhy_host::ss::parse(&text, a.interval);
        if parsed.samples.is_empty() {
            eprintln!(
                "tcpwhy ss: {}: no sockets found (expected the output of `ss -tin`)",
                p.display()
            );
            return crate::exit::UNREADABLE;
        }
        eprintln!(
            "tcpwhy ss: {}: {} sockets in {} snapshot{}{}",
            p.display(),
            parsed.samples.len(),
            parsed.snapshots,
            if parsed.snapshots == 1 { "" } else { "s" },
            if parsed.snapshots > 1 && !parsed.timestamped {
                format!(" (no timestamps: spaced {} s apart, see --interval)", a.interval)
            } else {
                String::new()
            }
        );
        for (what, n) in &parsed.skipped {
            eprintln!("tcpwhy ss: skipped {what} x{n}");
        }
        all.extend(parsed.samples);
    }
    if a.samples {
        use std::io::Write;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for s in &all {
            if serde_json::to_writer(&mut out, s).is_err() || writeln!(out).is_err() {
                return crate::exit::OK; // broken pipe
            }
        }
        return if out.flush().is_ok() { crate::exit::OK } else { crate::exit::FAILURE };
    }
    let mut diags: Vec<_> = series::group(&all).iter().map(series::diagnose).collect();
    crate::live::print_diagnoses(&mut diags, a.json, a.top)
}
