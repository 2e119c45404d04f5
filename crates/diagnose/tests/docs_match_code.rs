//! The documented thresholds are the code's: wherever docs/diagnose.md names
//! a constant (`NAME` in backquotes), the value written just before the
//! name must be the constant's value. Change one without the other and this
//! fails.

use std::path::Path;
use tcpwhy_core::units::{fmt_ms, Duration};
use tcpwhy_diagnose::decide::LEAD_MIN_SHARE;
use tcpwhy_diagnose::detect::loss::{DEEP_QUEUE_FACTOR, DEEP_QUEUE_MIN_MS, SPACING_P_VALUE_MAX, SPACING_RATIO_MAX, QUEUE_BEFORE_LOSS_FACTOR, QUEUE_BEFORE_LOSS_MIN_MS};
use tcpwhy_diagnose::detect::policing::{POLICER_BURST_MIN_SEGMENTS, POLICER_DISPERSION_MIN_RATIO, SHAPER_QUEUE_BURST_FACTOR, SHAPER_QUEUE_MIN_PACKETS, SMALL_BUCKET_PATH_RATIO};
use tcpwhy_diagnose::detect::spurious::{EARLY_TIMER_MAX_RTT_SHARE, EARLY_TIMER_MIN_MS, HELD_ELSEWHERE_MAX_SHARE, RTT_JUMP_FACTOR, RTT_JUMP_MIN_MS};
use tcpwhy_diagnose::detect::start::{CACHED_GREETING_MAX_INTERVALS, CACHED_MAX_SEGMENTS, HYSTART_DELAY_MAX_MS, HYSTART_DELAY_MIN_MS, HYSTART_LOW_WINDOW};
use tcpwhy_diagnose::path::{CAPACITY_MODE_MIN_SHARE, SENDER_MAX_ACK_STEP_SEGMENTS, TRAIN_QUEUED_MIN_SERVICE_TIMES};
use tcpwhy_diagnose::states::{HELD_ACK_MIN_SEGMENTS, HELD_ACK_MIN_WINDOW_SHARE, SLOW_START_ROUND_PAUSE_SHARE, WINDOW_CLOSED_SEGMENTS, WINDOW_DIPPED_MIN_SHARE};
use tcpwhy_diagnose::quality::{ACKS_OF_UNSEEN_DATA_MIN, CAPTURE_MISSED_SHARE_SIGNIFICANT};
use tcpwhy_diagnose::shape::{PAUSED_MIN_IDLE_SHARE, REQUEST_RESPONSE_MIN_TURN_SHARE};
use tcpwhy_flow::{CLOCK_STEP_BACK_NS, DUPLICATE_MAX_GAP_NS, DUPLICATE_MAX_GAP_WITH_IP_ID_NS, DUPLICATE_MEMORY_MAX_FRAMES};

fn doc(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs").join(name)).unwrap()
}

fn ms(ns: i64) -> String {
    // "50 ms", "1 ms": the docs write whole milliseconds without decimals.
    let v = Duration::from_nanos(ns as u64).as_millis_f64();
    if v.fract() == 0.0 {
        format!("{v:.0} ms")
    } else {
        fmt_ms(v)
    }
}

/// 262144 -> "262,144".
fn thousands(n: usize) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn pct(share: f64) -> String {
    format!("{}%", (share * 1000.0).round() / 10.0)
}

/// (constant, how its value is written in the docs)
fn constants() -> Vec<(&'static str, String)> {
    vec![
        ("DUPLICATE_MAX_GAP_WITH_IP_ID_NS", ms(DUPLICATE_MAX_GAP_WITH_IP_ID_NS)),
        ("DUPLICATE_MAX_GAP_NS", ms(DUPLICATE_MAX_GAP_NS)),
        ("DUPLICATE_MEMORY_MAX_FRAMES", format!("{DUPLICATE_MEMORY_MAX_FRAMES} frames")),
        ("CLOCK_STEP_BACK_NS", ms(CLOCK_STEP_BACK_NS)),
        ("ACKS_OF_UNSEEN_DATA_MIN", format!("{ACKS_OF_UNSEEN_DATA_MIN} pure ACKs")),
        ("CAPTURE_MISSED_SHARE_SIGNIFICANT", pct(CAPTURE_MISSED_SHARE_SIGNIFICANT)),
        ("PAUSED_MIN_IDLE_SHARE", pct(PAUSED_MIN_IDLE_SHARE)),
        ("REQUEST_RESPONSE_MIN_TURN_SHARE", pct(REQUEST_RESPONSE_MIN_TURN_SHARE)),
        ("QUEUE_BEFORE_LOSS_FACTOR", format!("{QUEUE_BEFORE_LOSS_FACTOR}")),
        ("QUEUE_BEFORE_LOSS_MIN_MS", format!("{QUEUE_BEFORE_LOSS_MIN_MS} ms")),
        ("DEEP_QUEUE_FACTOR", format!("{DEEP_QUEUE_FACTOR}")),
        ("REFILL_ON_ACK_MAX_NS", format!("{} µs", tcpwhy_diagnose::limits::REFILL_ON_ACK_MAX_NS / 1000)),
        ("QUEUE_FULL_SHARE", format!("{}", tcpwhy_diagnose::detect::loss::QUEUE_FULL_SHARE)),
        ("DEEP_QUEUE_MIN_MS", format!("{DEEP_QUEUE_MIN_MS} ms")),
        ("RTT_JUMP_FACTOR", format!("{RTT_JUMP_FACTOR}")),
        ("RTT_JUMP_MIN_MS", format!("{RTT_JUMP_MIN_MS} ms")),
        ("HELD_ELSEWHERE_MAX_SHARE", pct(HELD_ELSEWHERE_MAX_SHARE)),
        ("HYSTART_DELAY_MIN_MS", format!("{HYSTART_DELAY_MIN_MS} ms")),
        ("HYSTART_DELAY_MAX_MS", format!("{HYSTART_DELAY_MAX_MS} ms")),
        ("HYSTART_LOW_WINDOW", format!("{HYSTART_LOW_WINDOW} segments")),
        ("CACHED_MAX_SEGMENTS", format!("{CACHED_MAX_SEGMENTS} segments")),
        ("CACHED_GREETING_MAX_INTERVALS", format!("{CACHED_GREETING_MAX_INTERVALS} intervals")),
        ("EARLY_TIMER_MAX_RTT_SHARE", format!("{EARLY_TIMER_MAX_RTT_SHARE}")),
        ("EARLY_TIMER_MIN_MS", format!("{EARLY_TIMER_MIN_MS} ms")),
        ("TRAIN_QUEUED_MIN_SERVICE_TIMES", format!("{TRAIN_QUEUED_MIN_SERVICE_TIMES} transmission time")),
        ("HELD_ACK_MIN_SEGMENTS", format!("{HELD_ACK_MIN_SEGMENTS} segments")),
        ("HELD_ACK_MIN_WINDOW_SHARE", format!("{HELD_ACK_MIN_WINDOW_SHARE}")),
        ("WINDOW_DIPPED_SHARE", format!("{}", tcpwhy_diagnose::limits::WINDOW_DIPPED_SHARE)),
        ("WINDOW_DIPPED_MIN_SHARE", format!("{WINDOW_DIPPED_MIN_SHARE}")),
        ("SLOW_START_ROUND_PAUSE_SHARE", format!("{} a base RTT", fraction_words(SLOW_START_ROUND_PAUSE_SHARE))),
        ("POLICER_BURST_MIN_SEGMENTS", format!("{POLICER_BURST_MIN_SEGMENTS} segments")),
        ("WINDOW_CLOSED_SEGMENTS", format!("{WINDOW_CLOSED_SEGMENTS} segments")),
        ("LEAD_MIN_SHARE", pct(LEAD_MIN_SHARE)),
        ("LINK_FULL_DESPITE_LOSS_SHARE", pct(tcpwhy_diagnose::detect::loss::LINK_FULL_DESPITE_LOSS_SHARE)),
        ("LINK_FULL_SHARE", pct(tcpwhy_diagnose::detect::loss::LINK_FULL_SHARE)),
        ("POLICER_DISPERSION_MIN_RATIO", format!("{POLICER_DISPERSION_MIN_RATIO}")),
        ("SHAPER_QUEUE_BURST_FACTOR", format!("{SHAPER_QUEUE_BURST_FACTOR}")),
        ("SHAPER_QUEUE_MIN_PACKETS", format!("{SHAPER_QUEUE_MIN_PACKETS}")),
        ("SMALL_BUCKET_PATH_RATIO", format!("{SMALL_BUCKET_PATH_RATIO}")),
        ("EPISODE_EDGE_SAMPLES", format!("{}", tcpwhy_diagnose::policer::EPISODE_EDGE_SAMPLES)),
        ("QUEUE_EDGE_MIN_EPISODES", format!("{}", tcpwhy_diagnose::detect::policing::QUEUE_EDGE_MIN_EPISODES)),
        ("QUEUE_DRAIN_MAX_RATE_FACTOR", format!("{}", tcpwhy_diagnose::detect::policing::QUEUE_DRAIN_MAX_RATE_FACTOR)),
        ("QUEUE_DRAIN_UNDECIDED_FACTOR", format!("{}", tcpwhy_diagnose::detect::policing::QUEUE_DRAIN_UNDECIDED_FACTOR)),
        ("HOLE_GAP_SERVICE_QUANTILE", pct(tcpwhy_diagnose::detect::policing::HOLE_GAP_SERVICE_QUANTILE)),
        ("HOLE_GAP_MIN_HOLES", format!("{}", tcpwhy_diagnose::detect::policing::HOLE_GAP_MIN_HOLES)),
        ("HOLE_GAP_BUSY_MAX_SERVICE_TIMES", format!("{}", tcpwhy_diagnose::detect::policing::HOLE_GAP_BUSY_MAX_SERVICE_TIMES)),
        ("PAIR_MIN_COUNT", format!("{}", tcpwhy_diagnose::path::PAIR_MIN_COUNT)),
        ("RECEIVER_ECHO_MIN_SAMPLES", format!("{}", tcpwhy_diagnose::path::RECEIVER_ECHO_MIN_SAMPLES)),
        ("SPACING_P_VALUE_MAX", format!("{SPACING_P_VALUE_MAX}")),
        ("SPACING_RATIO_MAX", format!("{SPACING_RATIO_MAX}")),
        ("SENDER_MAX_ACK_STEP_SEGMENTS", format!("{SENDER_MAX_ACK_STEP_SEGMENTS} segments")),
        ("CAPACITY_MODE_MIN_SHARE", pct(CAPACITY_MODE_MIN_SHARE)),
        ("READER_MIN_ZERO_WINDOWS", format!("{} times", tcpwhy_diagnose::detect::window::READER_MIN_ZERO_WINDOWS)),
        ("READER_WINDOW_UNUSED_SHARE", format!("{}", tcpwhy_diagnose::detect::window::READER_WINDOW_UNUSED_SHARE)),
        ("PER_FLOW_FAST_RATIO", format!("{}", tcpwhy_diagnose::groups::PER_FLOW_FAST_RATIO)),
        ("SHARED_QUEUE_MIN_PAIRS", format!("{}", tcpwhy_diagnose::groups::SHARED_QUEUE_MIN_PAIRS)),
        ("PART_DATA_SEGMENTS", thousands(tcpwhy_diagnose::record::PART_DATA_SEGMENTS)),
        ("PART_AGREEMENT", pct(tcpwhy_diagnose::parts::PART_AGREEMENT)),
        ("IDLE_ACKS", thousands(tcpwhy_diagnose::record::IDLE_ACKS)),
        ("MAX_EVENTS", format!("{}", tcpwhy_diagnose::congestion::MAX_EVENTS)),
        ("FAST_ROUND_FACTOR", format!("{}", tcpwhy_diagnose::detect::policing::FAST_ROUND_FACTOR)),
        ("RATE_TEST_SKIP_ROUNDS", format!("{} rounds", tcpwhy_diagnose::detect::policing::RATE_TEST_SKIP_ROUNDS)),
        ("OVERSHOOT_SEARCH_SHARE", pct(tcpwhy_diagnose::detect::policing::OVERSHOOT_SEARCH_SHARE)),
        ("RATE_DEPENDENCE_MIN_Z", format!("z ≥ {}", tcpwhy_diagnose::detect::policing::RATE_DEPENDENCE_MIN_Z)),
        ("RATE_DEPENDENCE_POWER_RATIO", format!("{}", tcpwhy_diagnose::detect::policing::RATE_DEPENDENCE_POWER_RATIO)),
        ("RATE_INDEPENDENT_MAX_RATIO", format!("{}", tcpwhy_diagnose::detect::policing::RATE_INDEPENDENT_MAX_RATIO)),
        ("DEFAULT_RECORD_BUDGET", format!("{} Mi", tcpwhy_diagnose::record::DEFAULT_RECORD_BUDGET >> 20)),
        ("MIN_PART_DATA_SEGMENTS", thousands(tcpwhy_diagnose::record::MIN_PART_DATA_SEGMENTS)),
        ("LINUX_TCP_RMEM_MAX_DEFAULT", format!("{} MiB", tcpwhy_diagnose::LINUX_TCP_RMEM_MAX_DEFAULT >> 20)),
        ("RANGE_MIN_RATIO", pct(tcpwhy_diagnose::RANGE_MIN_RATIO - 1.0)),
        ("DISPERSION_MERGE_RECEIVER_NS", format!("{} µs", tcpwhy_diagnose::path::DISPERSION_MERGE_RECEIVER_NS / 1000)),
        ("DISPERSION_MERGE_SENDER_NS", format!("{} µs", tcpwhy_diagnose::path::DISPERSION_MERGE_SENDER_NS / 1000)),
        ("DISPERSION_MERGE_TICKS", format!("{} clock ticks", tcpwhy_diagnose::path::DISPERSION_MERGE_TICKS)),
        ("DISPERSION_MIN_TICKS", format!("{} clock ticks", tcpwhy_diagnose::path::DISPERSION_MIN_TICKS)),
        ("DISPERSION_MIN_INTERVALS", format!("{} intervals", tcpwhy_diagnose::path::DISPERSION_MIN_INTERVALS)),
        ("DISPERSION_MODE_MIN_COUNT", format!("{} of them", tcpwhy_diagnose::path::DISPERSION_MODE_MIN_COUNT)),
        ("DISPERSION_MODE_MIN_SHARE", pct(tcpwhy_diagnose::path::DISPERSION_MODE_MIN_SHARE)),
        ("DISPERSION_MIN_SEGMENT_SPACING_NS", format!("{} µs", tcpwhy_diagnose::path::DISPERSION_MIN_SEGMENT_SPACING_NS / 1000.0)),
        ("RENO_CUBIC_SPLIT", format!("{}", tcpwhy_diagnose::congestion::RENO_CUBIC_SPLIT)),
        ("CUBIC_BBR_SPLIT", format!("{}", tcpwhy_diagnose::congestion::CUBIC_BBR_SPLIT)),
        ("DEEPEST_LOSS_CUT", format!("{}", tcpwhy_diagnose::congestion::DEEPEST_LOSS_CUT)),
        ("HIGHEST_RECOVERY_READING", format!("{}", tcpwhy_diagnose::congestion::HIGHEST_RECOVERY_READING)),
        ("RENO_BETA", format!("{}", tcpwhy_diagnose::congestion::RENO_BETA)),
        ("BBR_UNCUT_MIN_SHARE", format!("{}", tcpwhy_diagnose::congestion::BBR_UNCUT_MIN_SHARE)),
        ("MIN_WINDOW_SEGMENTS", format!("{} segments", tcpwhy_diagnose::congestion::MIN_WINDOW_SEGMENTS)),
        ("RWND_HELD_SHARE", format!("{}", tcpwhy_diagnose::congestion::RWND_HELD_SHARE)),
        ("RTO_MIN_NS", ms(tcpwhy_diagnose::congestion::RTO_MIN_NS)),
        ("HIGH_MIN_RECOVERIES", format!("{} recoveries", tcpwhy_diagnose::congestion::HIGH_MIN_RECOVERIES)),
        ("HIGH_AGREEMENT", format!("{}", tcpwhy_diagnose::congestion::HIGH_AGREEMENT)),
        ("ACK_CLOCK_MAX_NS", format!("{} µs", tcpwhy_diagnose::congestion::ACK_CLOCK_MAX_NS / 1000)),
        ("AFTER_QUANTILE_NUM", format!("quarter {}", tcpwhy_diagnose::congestion::AFTER_QUANTILE_NUM)),
        ("BBR_CYCLE_ROUNDS", format!("{} round trips", tcpwhy_diagnose::congestion::BBR_CYCLE_ROUNDS)),
        ("BBR_CYCLE_SCAN_LOW", format!("between {}", tcpwhy_diagnose::congestion::BBR_CYCLE_SCAN_LOW)),
        ("BBR_CYCLE_SCAN_HIGH", format!("{} base RTTs", tcpwhy_diagnose::congestion::BBR_CYCLE_SCAN_HIGH)),
        ("BBR_CYCLE_CLIP", format!("{} times", tcpwhy_diagnose::congestion::BBR_CYCLE_CLIP)),
        ("BBR_CYCLE_MIN_CYCLES", format!("{} periods", tcpwhy_diagnose::congestion::BBR_CYCLE_MIN_CYCLES)),
        ("BBR_CYCLE_MAX_IDLE_SHARE", format!("{}", tcpwhy_diagnose::congestion::BBR_CYCLE_MAX_IDLE_SHARE)),
        ("BBR_CYCLE_MIN_SHARE", format!("{}", tcpwhy_diagnose::congestion::BBR_CYCLE_MIN_SHARE)),
        ("RATE_SEEN_MAX_SPREAD", format!("{}", tcpwhy_diagnose::policer::RATE_SEEN_MAX_SPREAD)),
        ("RATE_SCAN_MAX_STEPS", format!("{}", tcpwhy_diagnose::policer::RATE_SCAN_MAX_STEPS)),
        ("ACK_GAP_MIN_NS", format!("{} µs", tcpwhy_diagnose::congestion::ACK_GAP_MIN_NS / 1000)),
        ("ACK_CLOCKED_MIN_SHARE", format!("{}", tcpwhy_diagnose::congestion::ACK_CLOCKED_MIN_SHARE)),
        ("PACED_MAX_SHARE", format!("{}", tcpwhy_diagnose::congestion::PACED_MAX_SHARE)),
        ("RESPONSE_MARGIN", format!("{} times", tcpwhy_diagnose::congestion::RESPONSE_MARGIN)),
        ("LOSSLESS_FALL_SHARE", format!("{}", tcpwhy_diagnose::congestion::LOSSLESS_FALL_SHARE)),
        ("FALL_MIN_SEGMENTS", format!("{} new segments", tcpwhy_diagnose::congestion::FALL_MIN_SEGMENTS)),
        ("BULK_MAX_HELD_SHARE", format!("{}", tcpwhy_diagnose::congestion::BULK_MAX_HELD_SHARE)),
        ("PROBE_RTT_INTERVAL_NS", format!("{} s", tcpwhy_diagnose::congestion::PROBE_RTT_INTERVAL_NS / 1_000_000_000)),
        ("CUBIC_FACTOR_TOLERANCE", format!("{}", tcpwhy_diagnose::congestion::CUBIC_FACTOR_TOLERANCE)),
        ("SLOW_START_GROWTH", format!("{} times", tcpwhy_diagnose::congestion::SLOW_START_GROWTH)),
        ("SLOW_START_MIN_ROUNDS", format!("after {}", tcpwhy_diagnose::congestion::SLOW_START_MIN_ROUNDS)),
        ("CUBIC_UNKNOWN_BW_GROWTH", format!("{}", tcpwhy_diagnose::congestion::CUBIC_UNKNOWN_BW_GROWTH)),
        ("GROWTH_MIN_ROUNDS", format!("{} round trips", tcpwhy_diagnose::congestion::GROWTH_MIN_ROUNDS)),
        ("CUBIC_C", format!("C = {}", tcpwhy_diagnose::congestion::CUBIC_C)),
        ("CUBIC_FRIENDLY_PER_ROUND", format!("{:.2}", tcpwhy_diagnose::congestion::CUBIC_FRIENDLY_PER_ROUND)),
        ("GROWTH_TOLERANCE", format!("{} times", tcpwhy_diagnose::congestion::GROWTH_TOLERANCE)),
        ("GROWTH_MIN_SEPARATION", format!("{} times", tcpwhy_diagnose::congestion::GROWTH_MIN_SEPARATION)),
        ("INITIAL_TTLS", tcpwhy_diagnose::system::INITIAL_TTLS.map(|t| t.to_string()).join(", ")),
        ("MAX_HOPS", format!("{} routers", tcpwhy_diagnose::system::MAX_HOPS)),
        ("LINUX_LAYOUTS", tcpwhy_diagnose::system::LINUX_LAYOUTS[0].to_string()),
        ("WINDOWS_LAYOUTS", tcpwhy_diagnose::system::WINDOWS_LAYOUTS[0].to_string()),
        ("MACOS_LAYOUTS", tcpwhy_diagnose::system::MACOS_LAYOUTS[0].to_string()),
        ("FREEBSD_LAYOUTS", tcpwhy_diagnose::system::FREEBSD_LAYOUTS[0].to_string()),
        ("AMBIGUOUS_UNIX_LAYOUTS", tcpwhy_diagnose::system::AMBIGUOUS_UNIX_LAYOUTS[0].to_string()),
        ("SHARED_LAYOUTS", tcpwhy_diagnose::system::SHARED_LAYOUTS[0].to_string()),
        ("CUT_NEAR_S", format!("{} s", tcpwhy_diagnose::quality::CUT_NEAR_S)),
        ("INTERVAL_MIN_NS", ms(tcpwhy_diagnose::path::INTERVAL_MIN_NS)),
        ("INTERVAL_MAX_NS", format!("{} s", tcpwhy_diagnose::path::INTERVAL_MAX_NS / 1_000_000_000)),
        ("INTERVAL_NO_RTT_NS", ms(tcpwhy_diagnose::path::INTERVAL_NO_RTT_NS)),
        ("MAX_INTERVALS", thousands(tcpwhy_diagnose::path::MAX_INTERVALS as usize)),
        ("OUTRANKED_SHARE", fraction_words(tcpwhy_diagnose::decide::OUTRANKED_SHARE)),
        ("NETWORK_HOLDS_SHARE", fraction_words(tcpwhy_diagnose::text::NETWORK_HOLDS_SHARE)),
        ("BURST_GAP_MIN_NS", ms(tcpwhy_diagnose::detect::sender::BURST_GAP_MIN_NS)),
        ("WAKE_MAX_NS", ms(tcpwhy_diagnose::detect::sender::WAKE_MAX_NS)),
        ("WAKE_MIN_BURSTS", tcpwhy_diagnose::detect::sender::WAKE_MIN_BURSTS.to_string()),
        ("WOKEN_MIN_SHARE", pct(tcpwhy_diagnose::detect::sender::WOKEN_MIN_SHARE)),
        ("WAKE_COINCIDENCE_MAX", fraction_words(tcpwhy_diagnose::detect::sender::WAKE_COINCIDENCE_MAX)),
        ("APP_CLOCK_HIGH_MAX_WOKEN", fraction_words(tcpwhy_diagnose::detect::sender::APP_CLOCK_HIGH_MAX_WOKEN)),
        ("ACK_CLOCK_MAX_PERIOD_RTTS", format!("{} round trips", tcpwhy_diagnose::detect::sender::ACK_CLOCK_MAX_PERIOD_RTTS)),
        ("TIMER_MIN_CHUNKS", format!("{} chunks", tcpwhy_diagnose::detect::sender::TIMER_MIN_CHUNKS)),
        ("TIMER_MAX_JITTER", pct(tcpwhy_diagnose::detect::sender::TIMER_MAX_JITTER)),
        ("TIMER_MIN_IDLE_SHARE", pct(tcpwhy_diagnose::detect::sender::TIMER_MIN_IDLE_SHARE)),
        ("PAUSE_LEADS_MIN_IDLE_SHARE", fraction_words(tcpwhy_diagnose::detect::sender::PAUSE_LEADS_MIN_IDLE_SHARE)),
        ("TIMER_MIN_PERIOD_RTTS", format!("{} base RTTs", tcpwhy_diagnose::detect::sender::TIMER_MIN_PERIOD_RTTS)),
        ("TIMER_MIN_TICKS", format!("{} ticks", tcpwhy_diagnose::detect::sender::TIMER_MIN_TICKS)),
        ("TIMER_MAX_RELEASED_SHARE", fraction_words(tcpwhy_diagnose::detect::sender::TIMER_MAX_RELEASED_SHARE)),
        ("RELEASE_MIN_RTTS", format!("{}", tcpwhy_diagnose::detect::sender::RELEASE_MIN_RTTS)),
        ("RELEASE_MAX_RTTS", format!("{}", tcpwhy_diagnose::detect::sender::RELEASE_MAX_RTTS)),
    ]
}

/// A share as the prose says it.
fn fraction_words(v: f64) -> String {
    match v {
        _ if (v - 0.5).abs() < 1e-12 => "half".into(),
        _ if (v - 1.0 / 3.0).abs() < 1e-12 => "a third".into(),
        _ => format!("{:.0}%", v * 100.0),
    }
}

#[test]
fn every_named_constant_in_the_docs_has_the_codes_value() {
    let text = doc("diagnose.md");
    // The table of every named number is held to the code by
    // tests/thresholds.rs; the prose before it, here.
    let text = match text.find("<!-- named numbers: start -->") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let known = constants();
    let mut checked = 0;
    for (name, value) in &known {
        let needle = format!("`{name}`");
        let mut from = 0;
        let mut seen = false;
        while let Some(at) = text[from..].find(&needle) {
            let at = from + at;
            let before = &text[at.saturating_sub(80)..at];
            assert!(before.contains(value.as_str()), "docs/diagnose.md: {name} is {value} in the code, but the text before it reads {before:?}");
            seen = true;
            checked += 1;
            from = at + needle.len();
        }
        assert!(seen, "docs/diagnose.md does not name {name}");
    }
    // A constant named in the docs but unknown here is unchecked: list it.
    for (i, _) in text.match_indices('`') {
        let rest = &text[i + 1..];
        let w: String = rest.chars().take_while(|c| c.is_ascii_uppercase() || *c == '_').collect();
        if w.len() > 6 && w.contains('_') && rest[w.len()..].starts_with('`') {
            assert!(known.iter().any(|(n, _)| *n == w), "docs/diagnose.md names {w}: add it to this test");
        }
    }
    assert!(checked >= known.len());
}
