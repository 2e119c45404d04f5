"""Fixtures for tcpwhy's system tests (network namespaces, root only).

Run as root: ``pytest tests/system``.  Without root, without ``ip``/``tc`` or
without tcpdump the whole directory is skipped with a message saying why.

Fixtures
--------
``netns_pair``   two namespaces joined by one veth pair (function scope)
``netns_path``   sender - router - receiver (function scope)
``tcpwhy_bin``   path of the tcpwhy binary (env TCPWHY, else
                 <repo>/target/release/tcpwhy); skips if it does not exist
``workdir``      a per-session directory for the captures.  A scenario's
                 captures are deleted once its tests passed; they are kept
                 (paths in the failure message) if one failed, and always
                 with TCPWHY_SYSTEST_KEEP=1 (then in /tmp/tcpwhy-systest-*)

Namespaces are named ``twsys<pid>-<n><role>`` and are always deleted: by the
fixtures' finalizers, and by an ``atexit`` hook in netns.py should a run be
interrupted.  Namespaces of earlier runs whose process is gone are reaped at
session start.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import netns  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _skip_reason() -> str | None:
    if sys.platform != "linux":
        return "system tests need Linux network namespaces"
    if not netns.have_root():
        return "system tests need root (network namespaces, tc, tcpdump)"
    for tool in ("ip", "tc", "ss"):
        if not (shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")):
            return f"'{tool}' (iproute2) not found"
    if netns.ensure_tool("tcpdump", "tcpdump") is None:
        return "tcpdump not found and could not be installed"
    try:
        probe = netns.make_topology("pair")
    except Exception as e:  # pragma: no cover - environment specific
        return f"cannot create network namespaces/veth: {e}"
    probe.teardown()
    return None


_SKIP = None
_CHECKED = False


def _env_skip():
    global _SKIP, _CHECKED
    if not _CHECKED:
        _CHECKED = True
        _SKIP = _skip_reason()
        if _SKIP is None:
            netns.reap_stale_namespaces()
    if _SKIP:
        pytest.skip(_SKIP)


@pytest.fixture(scope="session")
def system_env():
    _env_skip()
    return True


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    keep = os.environ.get("TCPWHY_SYSTEST_KEEP") == "1"
    if keep:
        d = Path(tempfile.mkdtemp(prefix="tcpwhy-systest-"))
    else:
        d = tmp_path_factory.mktemp("captures")
    yield d


@pytest.fixture
def netns_pair(system_env):
    topo = netns.make_topology("pair")
    try:
        yield topo
    finally:
        topo.teardown()


@pytest.fixture
def netns_path(system_env):
    topo = netns.make_topology("routed")
    try:
        yield topo
    finally:
        topo.teardown()


def tcpwhy_path() -> Path:
    env = os.environ.get("TCPWHY")
    return Path(env) if env else REPO / "target" / "release" / "tcpwhy"


@pytest.fixture(scope="session")
def tcpwhy_bin() -> Path:
    p = tcpwhy_path()
    if not (p.is_file() and os.access(p, os.X_OK)):
        pytest.skip(f"tcpwhy binary not found at {p} (build it with "
                    f"'cargo build --release' or set TCPWHY=/path/to/tcpwhy)")
    return p


def pytest_configure(config):
    # SIGTERM (e.g. a CI timeout) should tear down like Ctrl-C does, so that
    # fixture finalizers delete the namespaces; SIGKILL is covered by the
    # children's PDEATHSIG and by reap_stale_namespaces() on the next run
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        def _term(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")
        signal.signal(signal.SIGTERM, _term)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        cs = getattr(item, "callspec", None)
        if cs is not None and "transfer" in cs.params:
            netns.FAILED_SCENARIOS.add(cs.params["transfer"])


def pytest_sessionfinish(session, exitstatus):
    # belt and braces: nothing of ours may survive the session
    netns._atexit_cleanup()
