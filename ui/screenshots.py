"""Screenshots of every page of the viewer, taken in headless Chromium (for docs/screenshots).

    python -m ui.screenshots RUN_DIR [--out docs/screenshots] [--pages town,people] [--tick N] [--name PREFIX]

Starts `agora ui RUN_DIR` on a free loopback port, opens each page in headless Chromium
(selenium with the system chromedriver) and saves PNGs. The browser test uses the same
helpers (``viewer``, ``chrome``). Needs selenium (a dev extra) and Debian's ``chromium`` and
``chromium-driver`` packages; Chromium is started with every background network feature off,
since the machines this runs on may have no internet.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
    "--disable-default-apps", "--disable-extensions", "--hide-scrollbars",
)
PAGES = ("town", "people", "conversations", "metrics", "runs", "whisper")


def find_chromium() -> tuple[str | None, str | None]:
    """(chromium binary, chromedriver) as installed, or None for what is missing."""
    browser = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), "/usr/bin/chromium")
                    if p and Path(p).is_file()), None)
    driver = next((p for p in (shutil.which("chromedriver"), "/usr/bin/chromedriver") if p and Path(p).is_file()), None)
    return browser, driver


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def agora_command() -> list[str]:
    script = Path(sys.executable).with_name("agora")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "simulation.cli"]


@contextmanager
def viewer(args: list[str], env: dict[str, str] | None = None, timeout: float = 60.0,
           log: Path | None = None) -> Iterator[str]:
    """Run `agora ui ARGS --port P` until the block ends; yields its base URL once healthy."""
    port = free_port()
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen([*agora_command(), "ui", *args, "--port", str(port)], stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})}, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"agora ui exited with status {proc.returncode}" + (f"; see {log}" if log else ""))
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                    if reply.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"agora ui did not answer on {url} within {timeout:.0f} s")
            time.sleep(0.25)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the group we started: agora and its streamlit child
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if log:
            out.close()  # type: ignore[union-attr]


@contextmanager
def chrome(width: int = 1440, height: int = 1000) -> Iterator[Any]:
    """A headless Chromium driven by the system chromedriver, with a fresh profile."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = find_chromium()
    if not (browser and driver_path):
        raise RuntimeError("chromium and chromedriver are needed (Debian: apt-get install chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="agora-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for_text(driver: Any, text: str, timeout: float = 30.0) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(lambda d: text in d.find_element(By.TAG_NAME, "body").text)


def settle(driver: Any, timeout: float = 30.0) -> None:
    """Wait until Streamlit has finished running the script (no 'Running...' status)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    time.sleep(0.5)
    WebDriverWait(driver, timeout).until(
        lambda d: not d.find_elements(By.CSS_SELECTOR, "[data-testid='stStatusWidget']"))
    time.sleep(1.0)  # let plotly finish drawing


def showcase(run_dir: Path) -> dict[str, str]:
    """Query strings that open pages on an interesting moment: the tick with the most people
    talking (else the most lines said), and the person who said the most."""
    from ui.db import RunDB

    with RunDB(run_dir) as db:
        busiest = db.one("select tick from agent_states where run_id = ? and status = 'talking' group by tick "
                         "order by count(*) desc, tick desc limit 1", (db.run_id,))
        if busiest is None:  # conversations that began and ended within one tick
            busiest = db.one("select tick from utterances where run_id = ? group by tick "
                             "order by count(*) desc, tick desc limit 1", (db.run_id,))
        talker = db.one("select speaker_id from utterances where run_id = ? group by speaker_id "
                        "order by count(*) desc limit 1", (db.run_id,))
    return {"town": "" if busiest is None else f"?tick={busiest}",
            "people": "" if talker is None else f"?agent={talker}"}


def capture(run_dir: Path, out: Path, width: int = 1440, height: int = 1100, pages: tuple[str, ...] = PAGES,
            tick: int | None = None, name: str = "") -> list[Path]:
    """One PNG per page of the viewer on ``run_dir`` (``pages``; the Town page at ``tick`` when given,
    else at the showcase's; each file ``{name}{page}.png``)."""
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    query = showcase(run_dir)
    if tick is not None:
        query["town"] = f"?tick={tick}"
    with viewer([str(run_dir), "--runs-dir", str(run_dir.parent)]) as url, chrome(width, height) as driver:
        for page in pages:
            driver.get(f"{url}/{'' if page == 'town' else page}{query.get(page, '')}")
            wait_for_text(driver, page.capitalize(), 60)
            settle(driver, 60)
            for _ in range(2):  # a taller window can draw more (plots sized on screen): measure again
                full = driver.execute_script(
                    "const m = document.querySelector('[data-testid=\"stMain\"]') || document.body;"
                    "return Math.max(m.scrollHeight, document.body.scrollHeight);")
                driver.set_window_size(width, min(max(height, int(full) + 40), 8000))
                settle(driver, 60)
            path = out / f"{name}{page}.png"
            driver.save_screenshot(str(path))
            driver.set_window_size(width, height)
            saved.append(path)
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument("--pages", default=",".join(PAGES), help="which pages, comma-separated (default: all)")
    parser.add_argument("--tick", type=int, default=None, help="the tick the Town page opens at (default: the "
                        "tick with most people talking)")
    parser.add_argument("--name", default="", help="a prefix for the files' names (e.g. 'director-')")
    args = parser.parse_args()
    pages = tuple(p.strip() for p in args.pages.split(",") if p.strip())
    unknown = sorted(set(pages) - set(PAGES))
    if unknown:
        parser.error(f"unknown page(s) {', '.join(unknown)}: the pages are {', '.join(PAGES)}")
    for path in capture(args.run_dir, args.out, pages=pages, tick=args.tick, name=args.name):
        print(path)


if __name__ == "__main__":
    main()
