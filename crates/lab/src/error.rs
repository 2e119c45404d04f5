//! What can go wrong in the lab: a scenario that cannot be read or is
//! invalid (nothing is created then), a machine that cannot run the lab, a
//! step that failed during a run, an interruption.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A scenario file could not be read.
    #[error("cannot read scenario file {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Neither a built-in scenario nor a file.
    #[error("unknown scenario {name:?}; built-in ones: {} (or give a path to a .toml file)", builtin.join(", "))]
    UnknownScenario { name: String, builtin: Vec<&'static str> },
    /// The scenario is not TOML (the message gives the line and column).
    #[error("{origin}: {source}")]
    Toml {
        origin: String,
        #[source]
        source: Box<toml::de::Error>,
    },
    /// A key of the scenario is unknown or its value has the wrong type or
    /// form (`key` is its dotted path).
    #[error("{origin}: {key}: {}", source.message())]
    Key {
        origin: String,
        key: String,
        #[source]
        source: Box<toml::de::Error>,
    },
    /// A `--set KEY=VALUE` that cannot be applied.
    #[error("--set {set:?}: {problem}")]
    Set { set: String, problem: String },
    /// A value out of range or inconsistent with another (`field` is its
    /// dotted name, `value` the value as given when there is one).
    #[error("{field}{}: {problem}", value.as_ref().map(|v| format!(" = {v}")).unwrap_or_default())]
    Value { field: String, value: Option<String>, problem: String },
    /// The traffic spec made of `[traffic]`, `[client]` and `[server]` is invalid.
    #[error(transparent)]
    Traffic(#[from] tcpwhy_traffic::Error),
    /// The kernel refused a setting of the scenario (a sysctl, a route)
    /// before the traffic ran.
    #[error("invalid scenario: {what}: {source}")]
    Refused {
        what: String,
        #[source]
        source: io::Error,
    },
    /// The machine cannot run the lab (not root, a tool or TUN missing).
    #[error("cannot run the lab here: {0}")]
    Environment(String),
    /// A step of a run failed on an I/O error.
    #[error("lab run failed: {step}: {source}")]
    Io {
        step: String,
        #[source]
        source: io::Error,
    },
    /// A step of a run failed (an agent, tcpdump, a timeout).
    #[error("lab run failed: {0}")]
    Failed(String),
    /// Interrupted by a signal; everything was removed.
    #[error("interrupted; the lab namespaces were removed")]
    Interrupted,
}

impl Error {
    /// Whether the scenario or a parameter is at fault (nothing was run):
    /// unknown, not TOML, a bad key or value, a refused setting.
    pub fn is_invalid_scenario(&self) -> bool {
        matches!(
            self,
            Error::UnknownScenario { .. }
                | Error::Toml { .. }
                | Error::Key { .. }
                | Error::Set { .. }
                | Error::Value { .. }
                | Error::Traffic(_)
                | Error::Refused { .. }
        )
    }

    /// A bad value of `field` (no value shown).
    pub(crate) fn field(field: impl Into<String>, problem: impl Into<String>) -> Error {
        Error::Value { field: field.into(), value: None, problem: problem.into() }
    }

    /// `field = value`: a bad value.
    pub(crate) fn value(field: impl Into<String>, value: impl ToString, problem: impl Into<String>) -> Error {
        Error::Value { field: field.into(), value: Some(value.to_string()), problem: problem.into() }
    }

    pub(crate) fn set(set: &str, problem: impl Into<String>) -> Error {
        Error::Set { set: set.to_string(), problem: problem.into() }
    }
}
