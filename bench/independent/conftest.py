"""The held-out runs (test_independent.py) as a pytest session of their own:
`sudo TCPWHY=target/release/tcpwhy python3 -m pytest -q bench/independent`.
They are a set of held-out runs, not a check of one behaviour, so they run
here with bench/independent/run.py's whole matrix, not in every CI run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def tcpwhy_bin() -> Path:
    env = os.environ.get("TCPWHY")
    p = Path(env) if env else REPO / "target" / "release" / "tcpwhy"
    if not (p.is_file() and os.access(p, os.X_OK)):
        pytest.skip(f"tcpwhy binary not found at {p} (cargo build --release, or set TCPWHY)")
    if os.geteuid() != 0:
        pytest.skip("the held-out runs need root (network namespaces, tc, nftables)")
    return p
