"""`agora ui` in a real browser: headless Chromium watches the Town page follow a run that
is being written, tick by tick, through fragment refreshes (no full-page reruns)."""

from __future__ import annotations

import re
import threading
import time

import pytest
from ui_support import build_run  # also puts the viewer (ui/) on sys.path

from ui.screenshots import chrome, find_chromium, viewer, wait_for_text

BROWSER, DRIVER = find_chromium()
pytestmark = [pytest.mark.heavy, pytest.mark.skipif(
    not (BROWSER and DRIVER),
    reason="needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver; .ci/run does)",
)]
TICK = re.compile(r"Tick (\d+) ·")


class Writer(threading.Thread):
    """Steps a scripted run in the background, one committed tick at a time, like `agora run`."""

    def __init__(self, loaded, out, ticks=200, pause=0.4):
        super().__init__(daemon=True)
        self.loaded, self.out, self.ticks, self.pause = loaded, out, ticks, pause
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.run_dir = None
        self.error: BaseException | None = None

    def run(self):
        try:  # the run's sqlite connection belongs to this thread, so the run is made here
            run = build_run(self.loaded, self.out, ticks=self.ticks, finish=False)
            run.model.step()
            self.run_dir = run.run_dir
            self.ready.set()
            while not self.stop.is_set() and run.model.tick < run.ticks:
                time.sleep(self.pause)
                run.model.step()
            run.store.close()
        except BaseException as exc:  # reported by the test
            self.error = exc
            self.ready.set()


def shown_tick(driver):
    from selenium.webdriver.common.by import By

    found = TICK.findall(driver.find_element(By.TAG_NAME, "body").text)
    return int(found[0]) if found else None


def sidebar_text(driver):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, "[data-testid='stSidebar']").text


def sidebar_ticks(driver):
    found = re.findall(r"(\d+)/200 ticks", sidebar_text(driver))
    return int(found[0]) if found else None


def test_town_page_follows_a_run_being_written(tmp_path, flagship):
    from selenium.webdriver.support.ui import WebDriverWait

    writer = Writer(flagship, tmp_path / "runs")
    writer.start()
    assert writer.ready.wait(120) and writer.error is None, writer.error
    try:
        with viewer([str(writer.run_dir), "--runs-dir", str(tmp_path / "runs")], env={"AGORA_UI_REFRESH_S": "1"},
                    log=tmp_path / "viewer.log") as url, chrome() as driver:
            driver.get(url)
            wait_for_text(driver, "Tick ", 90)
            first = shown_tick(driver)
            done = sidebar_ticks(driver)
            assert first is not None and done is not None and "running" in sidebar_text(driver)
            WebDriverWait(driver, 90, poll_frequency=0.5).until(lambda d: (shown_tick(d) or -1) >= first + 2)
            assert shown_tick(driver) > first
            WebDriverWait(driver, 30, poll_frequency=0.5).until(  # the sidebar's status line follows too
                lambda d: (sidebar_ticks(d) or -1) > done)
            people = [p.persona.name.split()[0] for p in flagship.people]
            assert any(name in driver.page_source for name in people), "the tick's people are on the page"
            shot = tmp_path / "town-live.png"
            driver.save_screenshot(str(shot))
            assert shot.stat().st_size > 10_000
    finally:
        writer.stop.set()
        writer.join(30)
    assert writer.error is None, writer.error
