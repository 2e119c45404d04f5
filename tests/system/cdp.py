"""A minimal Chrome DevTools Protocol client over --remote-debugging-pipe.

No websocket library: Chromium reads NUL-terminated JSON commands on fd 3 and
writes replies and events on fd 4. Enough to open a page, evaluate script,
send mouse events, take screenshots and collect console errors, CSP
violations, uncaught exceptions and JavaScript dialogs (alert()).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class CDPError(RuntimeError):
    pass


class Browser:
    def __init__(self, binary: str, width: int = 1400, height: int = 1600):
        self.profile = tempfile.mkdtemp(prefix="tcpwhy-chromium-")
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # Move the child's ends out of the way of 3/4 before dup2 in the child.
        a = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        b = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        os.close(to_child_r)
        os.close(from_child_w)

        def setup():
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [
            binary,
            "--headless=new",
            "--remote-debugging-pipe",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-dev-shm-usage",
            f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        self.log = open(os.path.join(self.profile, "stderr.log"), "wb")
        self.proc = subprocess.Popen(
            args, pass_fds=(3, 4, a, b), preexec_fn=setup, stdin=subprocess.DEVNULL,
            stdout=self.log, stderr=self.log,
        )
        os.close(a)
        os.close(b)
        self.w = to_child_w
        self.r = from_child_r
        self.buf = b""
        self.next_id = 0
        self.events: list[dict] = []
        self.session = None
        self.width, self.height = width, height

    # -- transport -----------------------------------------------------------
    def _read_message(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.r], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.r, 1 << 20)
            if not chunk:
                raise CDPError("chromium closed the pipe (see " + self.log.name + ")")
            self.buf += chunk
        msg, _, self.buf = self.buf.partition(b"\0")
        return json.loads(msg)

    def send(self, method: str, params: dict | None = None, session: bool = True, timeout: float = 60):
        self.next_id += 1
        mid = self.next_id
        m = {"id": mid, "method": method, "params": params or {}}
        if session and self.session:
            m["sessionId"] = self.session
        os.write(self.w, json.dumps(m).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            msg = self._read_message(max(0.0, left))
            if msg is None:
                raise CDPError(f"no reply to {method} within {timeout}s")
            if msg.get("id") == mid:
                if "error" in msg:
                    raise CDPError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def pump(self, seconds: float):
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            msg = self._read_message(left)
            if msg is None:
                return
            if "method" in msg:
                self.events.append(msg)

    # -- page ----------------------------------------------------------------
    def open_page(self, url: str):
        t = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        s = self.send("Target.attachToTarget", {"targetId": t["targetId"], "flatten": True}, session=False)
        self.session = s["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + 60
        while not any(e["method"] == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise CDPError("page did not load")
            self.pump(0.2)

    def eval(self, expr: str, await_promise: bool = False):
        r = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": await_promise})
        if "exceptionDetails" in r:
            raise CDPError(f"evaluate failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expr: str, timeout: float = 60) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.eval(expr):
                return True
            self.pump(0.2)
        return False

    def screenshot(self, path: Path):
        r = self.send("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(r["data"]))

    def mouse(self, kind: str, x: float, y: float, buttons: int = 1):
        self.send("Input.dispatchMouseEvent",
                  {"type": kind, "x": x, "y": y, "button": "left", "buttons": buttons, "clickCount": 1})

    def drag(self, x0: float, y: float, x1: float):
        self.mouse("mouseMoved", x0, y, 0)
        self.mouse("mousePressed", x0, y)
        for k in range(1, 11):
            self.mouse("mouseMoved", x0 + (x1 - x0) * k / 10, y)
        self.mouse("mouseReleased", x1, y, 0)

    def requests(self) -> list[str]:
        """URLs the page requested (Network.requestWillBeSent)."""
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions, log errors (CSP violations), dialogs."""
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + p["entry"].get("text", ""))
            elif m == "Page.javascriptDialogOpening":
                out.append("dialog: " + p.get("message", ""))
        return out

    def close(self):
        try:
            self.send("Browser.close", session=False, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.w, self.r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
