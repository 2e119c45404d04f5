//! The names of what limits a connection, shared by diagnose, host, lab and
//! report. The serialized names are the JSON strings of
//! `tcpwhy.diagnose/2` (docs/diagnose.md) and of the lab's scenario files.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// A name that is not one of a vocabulary's; the message lists them all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a {what}: one of {}", expected.join(", "))]
pub struct UnknownName {
    pub input: String,
    pub what: &'static str,
    pub expected: Vec<&'static str>,
}

macro_rules! vocabulary {
    ($(#[$doc:meta])* $name:ident, $what:expr, { $($(#[$vdoc:meta])* $variant:ident => $text:expr,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            /// Every name, in the order reports list them.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The name as the JSON and the scenario files write it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        /// Honours width and alignment (`{:<24}`), as `str` does.
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownName;
            fn from_str(s: &str) -> Result<Self, UnknownName> {
                $name::ALL.iter().copied().find(|v| v.as_str() == s).ok_or_else(|| UnknownName {
                    input: s.to_string(),
                    what: $what,
                    expected: $name::ALL.iter().map(|v| v.as_str()).collect(),
                })
            }
        }

        /// By name, so a map keyed by these serializes in the same order as
        /// one keyed by the strings (the JSON stays byte-identical).
        impl Ord for $name {
            fn cmp(&self, other: &Self) -> Ordering {
                self.as_str().cmp(other.as_str())
            }
        }
        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(de::Error::custom)
            }
        }
    };
}

vocabulary!(
    /// What held a data direction back during one interval (about one RTT):
    /// the kernel's chrono states (`tcpi_rwnd_limited`, `tcpi_sndbuf_limited`,
    /// busy) refined with what a capture can tell apart.
    Limit, "limit state", {
        ReceiverWindow => "receiver_window",
        SendBuffer => "send_buffer",
        SenderApplication => "sender_application",
        CongestionWindow => "congestion_window",
        Policer => "policer",
        BottleneckLink => "bottleneck_link",
        SlowStart => "slow_start",
        ReceiverApplication => "receiver_application",
        Idle => "idle",
    }
);

vocabulary!(
    /// The root cause of a direction's rate (`primary` in the diagnosis) and
    /// the cause a lab scenario is built to show.
    Cause, "cause", {
        ReceiverWindow => "receiver_window",
        SendBuffer => "send_buffer",
        WindowScalingOff => "window_scaling_off",
        CongestionLoss => "congestion_loss",
        Policer => "policer",
        Shaper => "shaper",
        BottleneckLink => "bottleneck_link",
        RandomLoss => "random_loss",
        SenderApplication => "sender_application",
        ReceiverApplication => "receiver_application",
        SlowStart => "slow_start",
        SpuriousRetransmission => "spurious_retransmission",
        CachedSsthresh => "cached_ssthresh",
        /// A request/response latency cause (docs/latency.md); never a bulk primary.
        DelayedAck => "delayed_ack",
        None => "none",
        /// The capture cannot support a conclusion (one direction only, the
        /// window scale cut off...): the diagnosis says what would settle it.
        Undetermined => "undetermined",
    }
);

/// How far a verdict can be trusted. `High` only where the evidence is
/// decisive and the capture point allows it; ordered Low < Medium < High
/// (a verdict's confidence is only ever lowered by later stages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Confidence {
    Low,
    Medium,
    High,
}

impl Confidence {
    pub const fn as_str(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }

    /// Lowers to `at_most` if above it.
    pub fn cap(&mut self, at_most: Confidence) {
        *self = (*self).min(at_most);
    }

    /// Lowers by one step: `high` to `medium`, `medium` to `low` (`low` stays).
    pub fn lower(&mut self) {
        *self = match self {
            Confidence::High => Confidence::Medium,
            Confidence::Medium | Confidence::Low => Confidence::Low,
        };
    }
}

impl fmt::Display for Confidence {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl Serialize for Confidence {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Cause {
    /// The causes `diagnose` gives as a direction's primary.
    pub fn is_primary(self) -> bool {
        self != Cause::DelayedAck
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_typos_are_refused() {
        for c in Cause::ALL {
            assert_eq!(c.as_str().parse::<Cause>().unwrap(), *c);
            assert_eq!(serde_json::to_string(c).unwrap(), format!("\"{c}\""));
        }
        for l in Limit::ALL {
            assert_eq!(serde_json::from_str::<Limit>(&format!("\"{l}\"")).unwrap(), *l);
        }
        assert_eq!(format!("[{:<8}]", Limit::Idle), "[idle    ]");
        let e = "reciever_window".parse::<Cause>().unwrap_err();
        assert!(e.to_string().contains("receiver_window, send_buffer"), "{e}");
    }

    #[test]
    fn confidence_is_only_ever_lowered() {
        let mut c = Confidence::High;
        c.cap(Confidence::Medium);
        assert_eq!(c, Confidence::Medium);
        c.cap(Confidence::High);
        assert_eq!(c, Confidence::Medium);
        assert_eq!(serde_json::to_string(&c).unwrap(), "\"medium\"");
    }

    #[test]
    fn maps_keyed_by_limits_serialize_in_name_order() {
        let m: std::collections::BTreeMap<Limit, f64> = Limit::ALL.iter().map(|l| (*l, 0.0)).collect();
        let keys: Vec<&str> = m.keys().map(|l| l.as_str()).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }
}
