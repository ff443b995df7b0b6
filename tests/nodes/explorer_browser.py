"""A real headless browser for the explorer's tests: Debian's chromium driven by Selenium through chromedriver
(scripts/install_browser.sh installs both; `make setup` runs it). Missing, the tests fail saying how to get it."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("VERITY_CHROMIUM", "/usr/bin/chromium"))
DRIVER = Path(os.environ.get("VERITY_CHROMEDRIVER", "/usr/bin/chromedriver"))
REPO = Path(__file__).resolve().parents[2]


def chrome(width: int = 1280, height: int = 1800):
    missing = [str(p) for p in (CHROMIUM, DRIVER) if not os.access(p, os.X_OK)]
    if missing:
        pytest.fail(f"the explorer's browser tests need a headless chromium: {', '.join(missing)} missing; run "
                    "scripts/install_browser.sh as root (make setup does), i.e. apt-get install chromium chromium-driver",
                    pytrace=False)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--hide-scrollbars"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(str(DRIVER)), options=opts)


def artifacts(tmp_path: Path) -> Path:
    """Where screenshots go: bench/out/explorer/ (kept after the run, ignored by git), printed for the log."""
    out = REPO / "bench" / "out" / "explorer"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError:
        out = tmp_path / "explorer-screenshots"
        out.mkdir(parents=True, exist_ok=True)
    print(f"explorer screenshots: {out}")
    return out


class ExplorerProcess:
    """`verity explorer --port 0` as users start it, with the test deployment's settings."""

    def __init__(self, env: dict, log: Path):
        self.log = log
        self.proc = subprocess.Popen([sys.executable, "-m", "verity", "explorer", "--port", "0"],
                                     env=dict(env, COLUMNS="200"), stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            found = re.search(r"explorer: (http://127\.0\.0\.1:\d+/)", log.read_text(errors="replace"))
            if found:
                self.url = found.group(1)
                return
            assert self.proc.poll() is None, f"verity explorer exited:\n{log.read_text(errors='replace')[-3000:]}"
            assert time.monotonic() < deadline, f"verity explorer did not start:\n{log.read_text(errors='replace')}"
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
