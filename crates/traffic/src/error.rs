//! The errors of this crate: a spec that cannot be parsed or is invalid,
//! bad hex, an HTTP head the generator does not take.

use std::fmt;

/// Everything in this crate that is not an I/O error during a run (those
/// are `io::Error`s, with this as their inner error where it applies).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not JSON, a field of the wrong type, or an unknown field or variant
    /// (the message names it, with line and column).
    #[error("traffic spec: {0}")]
    Json(#[from] serde_json::Error),
    /// Values out of range or inconsistent with each other: every problem
    /// found, each naming its field.
    #[error("invalid traffic spec: {}", Problems(.0))]
    Invalid(Vec<Problem>),
    /// `tcp_info_hex` with an odd number of digits.
    #[error("odd number of hex digits ({len})")]
    OddHex { len: usize },
    /// `tcp_info_hex` with something other than a hex digit.
    #[error("bad hex at {at}: {found:?} is not two hex digits")]
    BadHex { at: usize, found: String },
    /// An HTTP request or response head the generator does not take.
    #[error(transparent)]
    Http(#[from] HttpError),
}

impl Error {
    /// The problems of an [`Error::Invalid`] (empty for the other kinds).
    pub fn problems(&self) -> &[Problem] {
        match self {
            Error::Invalid(v) => v,
            _ => &[],
        }
    }
}

/// One problem with a spec: the field (or fields, comma-separated) and
/// what is wrong with its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub field: String,
    pub message: String,
}

impl Problem {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem { field: field.into(), message: message.into() }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Problems separated by "; ".
struct Problems<'a>(&'a [Problem]);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// Which HTTP head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    Request,
    Response,
}

impl fmt::Display for Head {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            Head::Request => "request",
            Head::Response => "response",
        })
    }
}

/// An HTTP/1.1 head the generator does not take (it speaks a small,
/// strict subset: `GET|POST /obj?bytes=N`, Content-Length bodies).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("{head} header is not UTF-8")]
    NotUtf8 { head: Head },
    #[error("{head} header does not end in CRLF CRLF")]
    Unterminated { head: Head },
    #[error("{head} header line without ':': {line:?}")]
    NoColon { head: Head, line: String },
    #[error("bad {head} header name {name:?}")]
    BadHeaderName { head: Head, name: String },
    #[error("{head}: bad Content-Length {value:?}")]
    BadContentLength { head: Head, value: String },
    #[error("{head}: conflicting Content-Length headers")]
    ConflictingContentLength { head: Head },
    #[error("{head}: Transfer-Encoding {value:?} is not supported")]
    TransferEncoding { head: Head, value: String },
    #[error("bad request line {line:?}")]
    BadRequestLine { line: String },
    #[error("unsupported version {version:?} (HTTP/1.1 only)")]
    Version { version: String },
    #[error("unsupported method {method:?} (GET or POST)")]
    Method { method: String },
    #[error("unknown path {path:?} (expected /obj?bytes=N)")]
    Path { path: String },
    #[error("target {target:?} has no bytes=N")]
    NoBytes { target: String },
    #[error("bad bytes={bytes:?} in {target:?}")]
    BadBytes { bytes: String, target: String },
    #[error("HTTP/1.1 request without Host")]
    NoHost,
    #[error("bad status line {line:?}")]
    BadStatusLine { line: String },
    #[error("server answered {line:?}")]
    Status { line: String },
    #[error("response without Content-Length")]
    NoContentLength,
    #[error("Content-Length {got}, asked for {asked}")]
    WrongLength { got: u64, asked: u64 },
}
