//! Why host evidence could not be loaded.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Evidence that could not be used: a file that cannot be read, a file
/// that holds none of what it should, a directory that is not a lab run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read (missing, no permission, not UTF-8 text).
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The file was read but holds nothing of the expected format.
    #[error("{}: no {} (expected {} output)", path.display(), expected.missing(), expected.producer())]
    NoData { path: PathBuf, expected: Format },
    /// `--lab-run` names something that is not a directory.
    #[error("{} is not a lab run directory", path.display())]
    NotLabRun { path: PathBuf },
}

impl Error {
    /// The file or directory the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Error::Unreadable { path, .. } | Error::NoData { path, .. } | Error::NotLabRun { path } => path,
        }
    }

    pub(crate) fn unreadable(path: &Path, source: io::Error) -> Error {
        Error::Unreadable { path: path.to_path_buf(), source }
    }

    pub(crate) fn no_data(path: &Path, expected: Format) -> Error {
        Error::NoData { path: path.to_path_buf(), expected }
    }
}

/// What a host evidence file was expected to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `ss -tin(m)` output (or JSON Lines of socket samples).
    Ss,
    /// `sysctl -a` output.
    Sysctl,
    /// `nstat -az` or `netstat -s` output.
    Counters,
}

impl Format {
    /// What was not found.
    fn missing(self) -> &'static str {
        match self {
            Format::Ss => "sockets found",
            Format::Sysctl => "`key = value` lines",
            Format::Counters => "counters",
        }
    }

    /// The command whose output was expected.
    fn producer(self) -> &'static str {
        match self {
            Format::Ss => "`ss -tin`",
            Format::Sysctl => "`sysctl -a`",
            Format::Counters => "`nstat -az` or `netstat -s`",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.producer())
    }
}
