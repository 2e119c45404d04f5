//! The libraries' errors mapped to the documented exit codes (`crate::exit`;
//! `tcpwhy lab`'s own, `crate::labexit`, beside them in labexit.rs), in one place:
//!
//! - a bad flag or filter, a bad scenario or traffic value: 2 (usage);
//! - an evidence file or scenario file that cannot be read (missing, no
//!   permission, not the format it should be): 3 (unreadable);
//! - the lab's own codes: 6 cannot run here, 130 interrupted;
//! - anything else: 1 (failure).

use crate::exit;
use crate::kcommon::FilterError;

/// The exit code an error ends the command with.
pub trait ToExitCode {
    fn exit_code(&self) -> u8;
}

impl ToExitCode for FilterError {
    fn exit_code(&self) -> u8 {
        exit::USAGE
    }
}

impl ToExitCode for tcpwhy_host::Error {
    /// Every kind is an input that could not be used at all: missing or
    /// unreadable, not `ss`/`sysctl`/`nstat` output (like a file that is not
    /// a capture), or a `--lab-run` that is not a directory.
    fn exit_code(&self) -> u8 {
        match self {
            tcpwhy_host::Error::Unreadable { .. }
            | tcpwhy_host::Error::NoData { .. }
            | tcpwhy_host::Error::NotLabRun { .. } => exit::UNREADABLE,
        }
    }
}

impl ToExitCode for tcpwhy_traffic::Error {
    fn exit_code(&self) -> u8 {
        use tcpwhy_traffic::Error as E;
        match self {
            E::Json(_) | E::Invalid(_) => exit::USAGE,
            _ => exit::FAILURE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn documented_codes() {
        assert_eq!(FilterError::UnknownWord("x".into()).exit_code(), 2);
        let unreadable = tcpwhy_host::Error::Unreadable {
            path: "/nonexistent".into(),
            source: io::Error::from(io::ErrorKind::NotFound),
        };
        assert_eq!(unreadable.exit_code(), 3);
        assert_eq!(
            tcpwhy_host::Error::NoData { path: "x".into(), expected: tcpwhy_host::error::Format::Sysctl }.exit_code(),
            3
        );
        assert_eq!(tcpwhy_lab::scenario::source("/nonexistent/x.toml").unwrap_err().exit_code(), 3);
        assert_eq!(tcpwhy_lab::scenario::source("no-such-scenario").unwrap_err().exit_code(), 2);
        let (o, t) = tcpwhy_lab::scenario::source("rwnd-rmem").unwrap();
        assert_eq!(tcpwhy_lab::scenario::load(&o, &t, &["link.mtu=1".into()]).unwrap_err().exit_code(), 2);
        assert_eq!(tcpwhy_lab::scenario::load(&o, &t, &["nokey".into()]).unwrap_err().exit_code(), 2);
        assert_eq!(tcpwhy_lab::Error::Environment("not root".into()).exit_code(), 6);
        assert_eq!(tcpwhy_lab::Error::Interrupted.exit_code(), 130);
        assert_eq!(tcpwhy_lab::Error::Failed("tcpdump did not start".into()).exit_code(), 1);
        assert_eq!(tcpwhy_traffic::TrafficSpec::from_json("{").unwrap_err().exit_code(), 2);
        assert_eq!(tcpwhy_traffic::TrafficSpec::from_json(r#"{"kind":"reqresp","requests":0}"#).unwrap_err().exit_code(), 2);
        assert_eq!(tcpwhy_traffic::from_hex("0").unwrap_err().exit_code(), 1);
    }
}
