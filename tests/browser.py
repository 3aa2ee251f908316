"""A small driver of headless Chromium over the DevTools protocol, through a pipe (Chromium's
``--remote-debugging-pipe``: messages of JSON ended by a NUL byte on its fds 3 and 4), so the
tests can click, choose a file in a file input and read the page back without a browser
automation package or a network port.

``python -m tests.browser PAGE PNG [--hash H] [--click SELECTOR]`` saves a screenshot of a page
(``make site-screenshot`` takes the README's with it).
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


class BrowserError(Exception):
    pass


class Browser:
    """One headless Chromium with one page, every host unresolvable (no network)."""

    def __init__(self, profile: Path, width: int = 1400, height: int = 1000) -> None:
        assert CHROMIUM is not None
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # above fd 4, so that putting one on fd 3 or 4 cannot overwrite the other
        for low in (to_chrome_r, from_chrome_w):
            high = fcntl.fcntl(low, fcntl.F_DUPFD_CLOEXEC, 10)
            os.close(low)
            to_chrome_r, from_chrome_w = (high, from_chrome_w) if low == to_chrome_r else (to_chrome_r, high)
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars", "--remote-debugging-pipe",
                 f"--window-size={width},{height}", f"--user-data-dir={profile}", "about:blank"]
        # A Python trampoline puts the two pipes on fds 3 and 4, where Chromium looks for them, then
        # becomes Chromium (a shell cannot: dash takes no fd number above 9).
        script = (f"import os, sys; os.dup2({to_chrome_r}, 3); os.dup2({from_chrome_w}, 4); "
                  "os.execv(sys.argv[1], sys.argv[1:])")
        self.proc = subprocess.Popen([sys.executable, "-c", script, CHROMIUM, *flags],
                                     pass_fds=(to_chrome_r, from_chrome_w),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.session = ""
        self.errors: list[str] = []
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self.call("Page.enable")
            self.call("Runtime.enable")
        except BaseException:
            self.close()
            raise

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buf:
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise BrowserError("Chromium closed its pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        out: dict[str, Any] = json.loads(msg)
        return out

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command to the page (to the browser before a page is attached); its result."""
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if self.session:
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("method") == "Runtime.exceptionThrown":
                self.errors.append(json.dumps(reply["params"]["exceptionDetails"])[:500])
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply["result"]
                return result

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise BrowserError(f"{expression[:80]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expression: str, timeout: float = 20.0) -> Any:
        """Poll until ``expression`` is truthy; its value."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.05)
        raise BrowserError(f"timed out waiting for {expression}")

    def open(self, url: str, ready: str = "document.body && document.body.dataset.ready") -> None:
        self.call("Page.navigate", url=url)
        self.wait(f"document.readyState === 'complete' && ({ready})")

    def choose_file(self, selector: str, path: Path) -> None:
        """Choose ``path`` in the file input at ``selector`` (as a reader picking it: the change event fires)."""
        root = self.call("DOM.getDocument")["root"]["nodeId"]
        node = self.call("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
        self.call("DOM.setFileInputFiles", nodeId=node, files=[str(path)])

    def screenshot(self, png: Path) -> None:
        png.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        try:
            self.session = ""
            self.call("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("page", type=Path)
    ap.add_argument("png", type=Path)
    ap.add_argument("--hash", default="", help="the URL's fragment (the site's filters)")
    ap.add_argument("--click", default="", help="a CSS selector to click once the page is ready")
    ap.add_argument("--size", default="1400x1000")
    args = ap.parse_args()
    if CHROMIUM is None:
        raise SystemExit("no Chromium installed (apt-get install -y chromium)")
    width, height = (int(x) for x in args.size.split("x"))
    with tempfile.TemporaryDirectory() as profile:
        b = Browser(Path(profile), width, height)
        try:
            b.open(args.page.resolve().as_uri() + (f"#{args.hash}" if args.hash else ""))
            if args.click:
                b.js(f"document.querySelector({json.dumps(args.click)}).click()")
                time.sleep(1.0)
            b.screenshot(args.png)
        finally:
            b.close()
    print(args.png)


if __name__ == "__main__":
    main()
