"""tcpwhy on a Ray cluster: one task per capture, given the path (never the
bytes), retried when a worker dies; the results stay in Ray's object store
as pyarrow tables until written or consumed.

    import ray, tcpwhy.ray
    ray.init()                       # or ray.init(address="auto") on a cluster
    ds = tcpwhy.ray.diagnose("/shared/captures/**/*.pcap*")
    ds.groupby("primary").count().show()
    tcpwhy.ray.diagnose(paths, output="/shared/results")   # Parquet, batch schema

Paths may be local (every worker must see them: a shared file system) or
URIs that ``pyarrow.fs`` opens (``s3://bucket/prefix/``, ``gs://``,
``hdfs://``): the task copies such a capture to a local temporary file,
diagnoses it and removes it; the ``file`` column keeps the URI.
"""

from __future__ import annotations

import glob as _glob
import os
import tempfile
from typing import Dict, Iterable, List, Optional, Tuple, Union

import tcpwhy

try:
    import ray
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("tcpwhy.ray needs Ray: pip install 'ray[data]'") from e

_GLOB_CHARS = ("*", "?", "[")


def _is_uri(p: str) -> bool:
    return "://" in p


def expand(paths_or_glob: Union[str, os.PathLike, Iterable[Union[str, os.PathLike]]]) -> List[str]:
    """Capture paths from paths, directories, glob patterns (``**``
    recursive) and ``pyarrow.fs`` URIs of files or prefixes, in order,
    each once. In a local directory a capture is told by its content, as
    ``tcpwhy batch`` tells it (``_expand`` also gives the other files)."""
    return _expand(paths_or_glob)[0]


def _expand(paths_or_glob) -> Tuple[List[str], List[Tuple[str, str]]]:
    """``expand``'s captures, and the files of local directories left out
    as not captures, with why."""
    if isinstance(paths_or_glob, (str, os.PathLike)):
        paths_or_glob = [paths_or_glob]
    out: List[str] = []
    skipped: List[Tuple[str, str]] = []
    for p in map(os.fspath, paths_or_glob):
        if _is_uri(p):
            out.extend(_expand_uri(p))
        elif os.path.isdir(p):
            found = sorted(os.path.join(root, f) for root, _, files in os.walk(p) for f in files)
            for f in found:
                why = None if _looks_like_capture(os.path.basename(f)) else tcpwhy._tcpwhy.not_a_capture(f)
                if why is None:
                    out.append(f)
                else:
                    skipped.append((f, why))
        elif any(c in p for c in _GLOB_CHARS):
            found = sorted(_glob.glob(p, recursive=True))
            if not found:
                raise FileNotFoundError(f"{p}: no file matches the pattern")
            out.extend(f for f in found if os.path.isfile(f))
        else:
            out.append(p)
    seen = set()
    return [p for p in out if not (p in seen or seen.add(p))], skipped


_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp")
_COMPRESSED = ("", ".gz", ".xz", ".zst", ".zstd")


def _looks_like_capture(name: str) -> bool:
    n = name.lower()
    return any(n.endswith(s + c) for s in _SUFFIXES for c in _COMPRESSED)


def _expand_uri(uri: str) -> List[str]:
    import pyarrow.fs as pafs

    fs, base = pafs.FileSystem.from_uri(uri)
    info = fs.get_file_info(base)
    scheme = uri.split("://", 1)[0]
    if info.type == pafs.FileType.File:
        return [uri]
    sel = pafs.FileSelector(base, recursive=True)
    return sorted(
        f"{scheme}://{i.path}" for i in fs.get_file_info(sel) if i.type == pafs.FileType.File and _looks_like_capture(i.base_name)
    )


# Fault injection for the test of retries: when this variable names a
# file that does not exist yet, the first task creates it and kills its own
# worker process, as a machine or an out-of-memory kill would.
_CRASH_ONCE_ENV = "TCPWHY_RAY_CRASH_ONCE"


def _diagnose_one(path: str, kernel: Optional[str]):
    """One capture's five batch tables (runs in a Ray worker)."""
    marker = os.environ.get(_CRASH_ONCE_ENV)
    if marker:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.close(fd)
            os._exit(1)
    if not _is_uri(path):
        tables, _err = tcpwhy._tcpwhy.diagnose_tables(path, kernel)
        return tuple(tables[t] for t in tcpwhy.TABLES)
    import pyarrow.fs as pafs
    import pyarrow.compute as pc
    import pyarrow as pa

    fs, p = pafs.FileSystem.from_uri(path)
    suffix = "".join(os.path.basename(p).partition(".")[1:]) or ".pcap"
    with tempfile.NamedTemporaryFile(suffix="." + suffix.lstrip("."), delete=False) as tmp, fs.open_input_stream(p) as src:
        while True:
            chunk = src.read(1 << 20)
            if not chunk:
                break
            tmp.write(chunk)
        local = tmp.name
    try:
        tables, _err = tcpwhy._tcpwhy.diagnose_tables(local, kernel)
    finally:
        os.unlink(local)
    out = []
    for t in tcpwhy.TABLES:
        tab = tables[t]
        i = tab.schema.get_field_index("file")
        col = pa.array([path] * tab.num_rows, pa.string())
        tab = tab.set_column(i, tab.schema.field(i), col)
        for name in ("message", "error"):
            if name in tab.column_names:
                j = tab.schema.get_field_index(name)
                tab = tab.set_column(j, tab.schema.field(j), pc.replace_substring(tab[name], local, path))
        out.append(tab)
    return tuple(out)


def diagnose_tables(
    paths_or_glob,
    *,
    kernel: Optional[str] = None,
    max_retries: int = 3,
    num_cpus: float = 1,
) -> Dict[str, "ray.data.Dataset"]:
    """All five batch tables (``directions``, ``quality``, ``groups``,
    ``errors``, ``files``) as ``ray.data.Dataset``s, from one Ray task per
    capture (``max_retries``: times a task is rerun when its worker dies)."""
    paths, skipped = _expand(paths_or_glob)
    task = ray.remote(_diagnose_one).options(num_returns=len(tcpwhy.TABLES), max_retries=max_retries, num_cpus=num_cpus)
    refs = [task.remote(p, kernel) for p in paths]
    # A file of a directory that is not a capture: its files row, as tcpwhy batch writes it.
    for p, why in skipped:
        tables = tcpwhy._tcpwhy.skipped_tables(p, why)
        refs.append(tuple(ray.put(tables[t]) for t in tcpwhy.TABLES))
    out = {}
    for i, name in enumerate(tcpwhy.TABLES):
        if refs:
            out[name] = ray.data.from_arrow_refs([r[i] for r in refs])
        else:
            out[name] = ray.data.from_arrow(tcpwhy.schema(name).empty_table())
    return out


def diagnose(
    paths_or_glob,
    *,
    table: str = "directions",
    output: Optional[Union[str, os.PathLike]] = None,
    kernel: Optional[str] = None,
    max_retries: int = 3,
    num_cpus: float = 1,
) -> "ray.data.Dataset":
    """Diagnose captures on the Ray cluster; returns the ``table``
    (default ``directions``: one row per connection direction, schema
    ``tcpwhy.batch/1``) as a ``ray.data.Dataset``. With ``output``, all five
    tables are written as Parquet under ``output/<table>/`` (a local path or
    a ``pyarrow.fs`` URI), the layout ``tcpwhy batch`` writes."""
    if table not in tcpwhy.TABLES:
        raise ValueError(f"table={table!r}: expected one of {tcpwhy.TABLES}")
    ds = diagnose_tables(paths_or_glob, kernel=kernel, max_retries=max_retries, num_cpus=num_cpus)
    if output is not None:
        out = os.fspath(output)
        for name, d in ds.items():
            d.write_parquet(out.rstrip("/") + "/" + name)
    return ds[table]
