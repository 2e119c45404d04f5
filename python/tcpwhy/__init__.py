"""tcpwhy for Python: why is this TCP connection slow?

Every function reads a capture (pcap or pcapng, optionally gzip/xz/zstd
compressed) in Rust with the GIL released and returns a ``pyarrow.Table``
handed over through the Arrow C data interface (no copy through Python
objects).

- ``diagnose(path)``: one row per connection direction diagnosed, with the
  primary cause, confidence, limits, findings, fixes and the predicted rate
  after the fix (schema ``tcpwhy.batch/1``, the ``directions`` table of
  ``tcpwhy batch``; docs/batch.md). ``table=`` picks another batch table
  (``quality``, ``groups``, ``errors``, ``todo``, ``files``), ``tables=True`` returns
  all of them in a dict.
- ``stats(path)``: one row per connection (packets, bytes, retransmitted
  bytes, goodput per direction; the report's ``connections`` table).
- ``packets(path)``: one row per TCP segment with the analysis flags.
- ``pair(a, b)``: two captures of one path (client and server, or either
  side of a middlebox) compared, as ``tcpwhy diagnose --pair`` does: one row
  per connection seen at both points (the ``pairs`` table of ``tcpwhy
  batch --pairs``; docs/pair.md). ``tables=True`` adds both captures' own
  batch tables.
- ``batch(paths, out)``: many captures on every core into a Parquet dataset,
  as ``tcpwhy batch`` does; ``pairs=[(a, b), ...]`` compares pairs instead.
- ``tcpwhy.ray.diagnose(paths_or_glob)``: the same over a Ray cluster,
  returning a ``ray.data.Dataset``.

A capture that cannot be read raises ``UnreadableCaptureError``
(``exit_code`` 3, as the CLI); one that is truncated or corrupt part-way
raises ``TruncatedCaptureError`` (``exit_code`` 4) whose ``partial``
attribute holds the results for the part before the damage, unless
``errors="warn"`` (a ``CaptureWarning``, and the partial result returned) or
``errors="ignore"``.
"""

from __future__ import annotations

import os
import warnings
from typing import Dict, Iterable, Optional, Union

from . import _tcpwhy

__version__ = _tcpwhy.__version__
BATCH_SCHEMA = _tcpwhy.BATCH_SCHEMA
TABLES = ("directions", "quality", "groups", "errors", "todo", "files")

PathLike = Union[str, "os.PathLike[str]"]


class CaptureError(Exception):
    """A capture could not be read, or not to its end.

    ``kind`` is "unreadable", "truncated" or "corrupt"; ``exit_code`` is the
    code ``tcpwhy`` would exit with (3 or 4); ``path`` the capture;
    ``partial`` the results for the frames before the damage (None when
    nothing could be read).
    """

    exit_code = 1

    def __init__(self, message: str, *, path: str, kind: str, partial=None):
        super().__init__(message)
        self.path = path
        self.kind = kind
        self.partial = partial


class UnreadableCaptureError(CaptureError, OSError):
    """Missing, not readable, or not a pcap/pcapng file (exit code 3)."""

    exit_code = 3


class TruncatedCaptureError(CaptureError):
    """The capture ends or is corrupt part-way (exit code 4); ``partial``
    holds the results for the frames before it."""

    exit_code = 4


class CaptureWarning(UserWarning):
    """Issued for a damaged capture with ``errors="warn"``."""


_ERRORS = ("raise", "warn", "ignore")


def _finish(path, result, err, errors: str):
    if errors not in _ERRORS:
        raise ValueError(f"errors={errors!r}: expected one of {_ERRORS}")
    if err is None:
        return result
    kind, code, message = err
    if code == 3:
        raise UnreadableCaptureError(message, path=str(path), kind=kind)
    if code == 4:
        if errors == "raise":
            raise TruncatedCaptureError(message, path=str(path), kind=kind, partial=result)
        if errors == "warn":
            warnings.warn(message, CaptureWarning, stacklevel=3)
        return result
    raise CaptureError(message, path=str(path), kind=kind, partial=result)


def diagnose(
    path: PathLike,
    *,
    table: str = "directions",
    tables: bool = False,
    kernel: Optional[str] = None,
    errors: str = "raise",
):
    """Diagnose one capture.

    Returns the ``directions`` table (one row per connection direction with
    enough data to judge), or the table named by ``table``, or with
    ``tables=True`` a dict of all five batch tables. ``kernel`` is the
    version the fixes are for ("5.10", "6.8"; default 6.6+).
    """
    if not tables and table not in TABLES:
        raise ValueError(f"table={table!r}: expected one of {TABLES}")
    result, err = _tcpwhy.diagnose_tables(os.fspath(path), kernel)
    out = result if tables else result[table]
    return _finish(path, out, err, errors)


def pair(
    a: PathLike,
    b: PathLike,
    *,
    table: str = "pairs",
    tables: bool = False,
    kernel: Optional[str] = None,
    errors: str = "raise",
):
    """Compare two captures of one path, taken at two points.

    Returns the ``pairs`` table: one row per connection seen at both points
    (matched by its ISNs, through NAT, a SYN proxy or a terminating proxy),
    with the clock offset's bounds, where each direction lost segments
    (before, between or after the points), the one-way delay's growth, what
    a middlebox changed and the paired findings; a single row with the
    ``messages`` when nothing matched. ``table`` picks another table
    (a capture's ``directions``...: both captures' rows), ``tables=True``
    returns them all in a dict.
    """
    if not tables and table not in TABLES + ("pairs",):
        raise ValueError(f"table={table!r}: expected one of {TABLES + ('pairs',)}")
    result, err, err_path = _tcpwhy.pair_tables(os.fspath(a), os.fspath(b), kernel)
    out = result if tables else result[table]
    return _finish(err_path or a, out, err, errors)


def stats(path: PathLike, *, errors: str = "raise"):
    """One row per connection: packets, bytes, retransmitted bytes and
    goodput in each direction (``_ab``: a to b, ``_ba``: b to a)."""
    result, err = _tcpwhy.stats(os.fspath(path))
    return _finish(path, result, err, errors)


def packets(path: PathLike, *, errors: str = "raise"):
    """One row per TCP segment: frame, time, connection, direction,
    sequence, length, ACK, window, bytes in flight, RTT sample and the
    analysis flags (docs/report.md)."""
    result, err = _tcpwhy.packets(os.fspath(path))
    return _finish(path, result, err, errors)


def batch(
    paths: Union[PathLike, Iterable[PathLike]],
    out: PathLike,
    *,
    partition_by: str = "none",
    jobs: Optional[int] = None,
    kernel: Optional[str] = None,
    pairs: Optional[Iterable[tuple]] = None,
) -> Dict[str, int]:
    """Diagnose many captures (files, directories, glob patterns) on
    ``jobs`` threads into the Parquet dataset ``out``, like ``tcpwhy
    batch``; resumable. Files of directories are captures by their
    content; the others are listed in the ``files`` table with ``skipped``
    saying why. ``pairs=[(a, b), ...]`` (with ``paths`` empty) compares
    each pair of captures of one path into the ``pairs`` table instead, as
    ``tcpwhy batch --pairs`` does, and diagnoses each capture once. Returns
    counts (files, skipped_done, not_captures, errors, packets, pairs...)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    pairs = [(os.fspath(a), os.fspath(b)) for a, b in (pairs or [])]
    if pairs and list(paths):
        raise ValueError("batch: give paths or pairs, not both")
    return _tcpwhy.batch([os.fspath(p) for p in paths], os.fspath(out), partition_by, jobs, kernel, pairs)


def schema(table: str = "directions"):
    """The pyarrow schema of a batch table."""
    return _tcpwhy.schema(table)


__all__ = [
    "BATCH_SCHEMA",
    "TABLES",
    "CaptureError",
    "CaptureWarning",
    "TruncatedCaptureError",
    "UnreadableCaptureError",
    "batch",
    "diagnose",
    "packets",
    "pair",
    "schema",
    "stats",
]
