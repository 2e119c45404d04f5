//! One output, one story: the checks a direction's diagnosis must pass
//! against itself. A prediction no larger than the untouched time allows,
//! no fix predicted to slow the flow, a primary that holds its share of the
//! time (or says why not), a ceiling no lower than the rate the flow
//! reached, no sentence citing evidence it counts as zero, a what-if whose
//! time won back is of the direction's own duration, no token bucket
//! shallower than the segments it passed.
//! (A fixed pacing rate behind a policer a flow shares may predict less
//! than that flow got: it gets its share.) The tests run
//! them over every shared capture, the example and the lab's runs.

use tcpwhy_core::units::calc;
use crate::model::DirectionDiagnosis;
use crate::timeline::owned_by;
use tcpwhy_core::Limit;

/// Rounding in the JSON (three decimals) and in the shares.
const SLACK: f64 = 1e-3;
/// The primary's states hold at least this share of the largest other
/// non-idle state's time ([`crate::decide::OUTRANKED_SHARE`]).
const PRIMARY_MIN_SHARE: f64 = crate::decide::OUTRANKED_SHARE;
/// A ceiling computed at one RTT and a rate measured over the whole
/// direction differ by the RTT's spread: a ceiling this much below the
/// rate reached is a contradiction.
const CEILING_SLACK: f64 = 0.05;
/// The states that outrank a primary (`crate::decide`'s time check): read
/// from the windows and the sender's own sending, not from losses and the
/// RTT, which the causes read first explain themselves.
const OUTRANKING: &[Limit] = &[Limit::ReceiverApplication, Limit::SenderApplication, Limit::ReceiverWindow, Limit::SendBuffer];
/// Sentences that state a condition and count its evidence as zero.
const ZERO_EVIDENCE: &[&str] = &[" 0 zero-window", " 0 losses", " 0 retransmi", "0.00 s at zero"];

/// What in `d` contradicts the rest of it, one line each (empty: none).
pub fn problems(d: &DirectionDiagnosis) -> Vec<String> {
    let mut out = Vec::new();
    let share = |states: &[Limit]| -> f64 { states.iter().map(|s| d.limits.get(s).copied().unwrap_or(0.0)).sum() };
    for w in &d.what_if {
        // what no fix of these states shortens: idle time and the
        // applications' own states it does not address
        let untouched: Vec<Limit> = [Limit::Idle, Limit::SenderApplication, Limit::ReceiverApplication]
            .into_iter()
            .filter(|s| !w.addresses.contains(s))
            .collect();
        let u = share(&untouched);
        let bound = if u > 0.0 && d.duration_s > 0.0 { calc::bps(d.bytes as f64, d.duration_s * u) } else { f64::INFINITY };
        for (what, p) in [("predicted", w.predicted_bps), ("predicted_high", w.predicted_high_bps)] {
            let Some(p) = p else { continue };
            if p > bound * (1.0 + SLACK) {
                out.push(format!(
                    "{}: {what} {:.0} bit/s exceeds {:.0} bit/s, all the untouched time ({:.0}% of it: {}) allows",
                    w.fix,
                    p,
                    bound,
                    u * 100.0,
                    untouched.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
            // a fixed pacing rate behind a shared policer gives a flow that
            // took more than its share its share (the assumption says so)
            if p < w.current_bps * (1.0 - SLACK) && w.bound != "policer_rate" {
                out.push(format!("{}: {what} {:.0} bit/s is below the current {:.0} bit/s", w.fix, p, w.current_bps));
            }
        }
    }
    // the time won back is of this direction's duration, and the rate is
    // its bytes over what is left (a long direction's parts, crate::parts)
    for w in &d.what_if {
        let (Some(after), Some(saved), Some(p)) = (w.duration_s, w.saved_s, w.predicted_bps) else { continue };
        let off = |a: f64, b: f64| (a - b).abs() > SLACK * a.abs().max(b.abs()).max(1e-3);
        if off(after + saved, d.duration_s) {
            out.push(format!("{}: {after:.3} s after the fix and {saved:.3} s won back are not the direction's {:.3} s", w.fix, d.duration_s));
        } else if after > 0.0 && d.goodput_bps.is_some() && off(p, calc::bps(d.bytes as f64, after)) {
            out.push(format!("{}: {p:.0} bit/s predicted is not the {} bytes over the {after:.3} s after the fix", w.fix, d.bytes));
        }
    }
    // a token bucket passes a packet only when it holds the packet's
    // length (RFC 2697): it is no shallower than a full-sized segment
    for f in d.findings.iter().filter(|f| f.kind == "policer") {
        if let Some(b) = f.numbers.get("burst_bytes").and_then(|v| v.as_u64()) {
            if b < u64::from(d.segment_bytes) {
                out.push(format!("policer: a burst of {b} B, below the {} B segments it passed: {}", d.segment_bytes, f.text));
            }
        }
    }
    let owned = owned_by(d.primary);
    if !owned.is_empty() {
        let own = share(owned);
        let lead = d
            .limits
            .iter()
            .filter(|(s, _)| OUTRANKING.contains(s) && !owned.contains(s))
            .max_by(|a, b| a.1.total_cmp(b.1));
        if let Some((s, v)) = lead {
            let explained = d.to_confirm.iter().any(|t| t.contains("wins back the most time"));
            if own + SLACK < PRIMARY_MIN_SHARE * v && !explained {
                out.push(format!("primary {} holds {:.0}% of the time against {:.0}% for {s}, and does not say why", d.primary, own * 100.0, v * 100.0));
            }
        }
    }
    // a ceiling the flow went past is no ceiling
    let reached = d.goodput_bps.unwrap_or(0.0);
    for f in &d.findings {
        if let Some(c) = f.numbers.get("ceiling_bps").and_then(|v| v.as_f64()) {
            if c < reached * (1.0 - CEILING_SLACK) {
                out.push(format!("{}: a ceiling of {c:.0} bit/s below the {reached:.0} bit/s the flow reached: {}", f.kind, f.text));
            }
        }
    }
    for t in std::iter::once(&d.summary).chain(d.findings.iter().map(|f| &f.text)) {
        for z in ZERO_EVIDENCE {
            if t.contains(z) {
                out.push(format!("states a condition its evidence counts as zero ({z:?}): {t}"));
            }
        }
    }
    out
}
