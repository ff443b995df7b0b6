"""The explorer in a real headless Chromium against a live devnet job with a dispute (tests/nodes' `net`): every page
renders with full node names, the job page changes through its server-sent events without a reload, the dispute
trail shows the pinpointed step and the referees' votes, the model page's `verity verify` check passes, and the job
page fits a phone's width. Screenshots land in bench/out/explorer/ (printed); the job page's also in
docs/explorer-job.png when VERITY_EXPLORER_DOCS_SHOT=1."""
from __future__ import annotations

import os
import shutil
import time

import pytest

from explorer_browser import REPO, ExplorerProcess, artifacts, chrome
from node_builders import wait_for

pytestmark = pytest.mark.integration


def test_explorer_liveDisputedJob_inHeadlessChromium_succeeds(net, tmp_path):
    from selenium.webdriver.common.by import By

    shots = artifacts(tmp_path)
    browser = chrome()
    explorer = None
    try:
        # test_end_to_end's bitflip dispute: the flipper and solver-1 are the only solvers, so both hold every task
        net.start_node("solver-1", 1)
        net.start_node("referee-3", 2, roles="verifier,referee")
        flipper = net.start_node("flipper", 3, faults=["bitflip@step=15"])
        net.start_node("referee-1", 4, roles="verifier,referee")
        net.start_node("referee-2", 5, roles="verifier,referee")
        net.wait_registered(5)
        explorer = ExplorerProcess(net.env, net.root / "explorer.log")
        url = explorer.url

        browser.get(url)
        nodes = browser.find_element(By.ID, "s-nodes").text
        for name in ("solver-1", "referee-3", "flipper", "referee-1", "referee-2"):
            assert name in nodes, f"node name {name} not on the overview:\n{nodes}"
        browser.save_screenshot(str(shots / "overview.png"))

        job_id = net.post(shards=2, rounds=1, steps=20, k=10, replication=2, execution_window=60)
        browser.get(f"{url}job/{job_id}")
        assert f"Job {job_id}" in browser.find_element(By.ID, "s-jobhead").text
        browser.execute_script("window.__sameDocument = 42")   # gone if the page reloads
        wait_for(lambda: int(browser.find_element(By.TAG_NAME, "body").get_attribute("data-updates")) > 0, 90,
                 "a section swapped in by the job page's SSE stream")
        assert browser.execute_script("return window.__sameDocument") == 42, "the page reloaded"
        assert "live" in browser.find_element(By.ID, "live-status").text

        net.wait_job(job_id)
        # read in the page in one go: an SSE swap may replace the section between two WebDriver calls
        text, votes = wait_for(lambda: browser.execute_script(RESOLVED_TRAIL), 60,
                               "a resolved dispute trail pushed to the job page")
        assert "step 14" in text, text                         # the update from global step 14 to 15 differs
        assert "checkpoint" in text and "flipper" in text and "solver-1" in text
        assert votes and any("for the" in v for v in votes), votes
        wait_for(lambda: "conserved" in browser.find_element(By.ID, "conservation").text, 30, "escrow conservation")
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#s-curves svg circle"), 60, "the round's curve point")
        assert browser.execute_script("return window.__sameDocument") == 42, "the page reloaded"
        time.sleep(1.5)                                        # the swapped sections' highlight fades
        browser.save_screenshot(str(shots / "job.png"))
        if os.environ.get("VERITY_EXPLORER_DOCS_SHOT") == "1":
            shutil.copy(shots / "job.png", REPO / "docs" / "explorer-job.png")

        browser.set_window_size(390, 844)                      # a phone
        browser.get(f"{url}job/{job_id}")
        browser.save_screenshot(str(shots / "job-phone.png"))
        overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"the job page is {overflow}px wider than a phone: {browser.execute_script(WIDE)}"
        browser.set_window_size(1280, 1800)

        browser.get(f"{url}node/{flipper.address}")
        head = browser.find_element(By.ID, "s-nodehead").text
        assert "flipper" in head and "0 won /" in head and "reputation factor" in head.lower()
        assert "lost" in browser.find_element(By.ID, "s-nodedisputes").text
        browser.save_screenshot(str(shots / "node.png"))

        browser.get(f"{url}job/{job_id}/model")
        assert browser.find_element(By.ID, "verify-result").text == "verified", \
            browser.find_element(By.TAG_NAME, "main").text[-2000:]
        assert f"final model of job {job_id}" in browser.find_element(By.CSS_SELECTOR, "pre.verdict").text
        browser.save_screenshot(str(shots / "model.png"))
    finally:
        browser.quit()
        if explorer is not None:
            explorer.stop()


# the elements that stick out past the window's right edge (a phone-width failure's message)
WIDE = """
return Array.from(document.querySelectorAll('main *')).filter(e => e.getBoundingClientRect().right > window.innerWidth + 1
  && !e.closest('.scroll')).slice(-5).map(e => e.tagName + '.' + e.className + ': ' + e.textContent.slice(0, 60));
"""

# the first resolved trail's text and its referees' vote lines, or null
RESOLVED_TRAIL = """
for (const a of document.querySelectorAll('#s-disputes article.trail')) {
  if (a.querySelector('h3').textContent.includes('wins'))
    return [a.innerText, Array.from(a.querySelectorAll('.votes .vote')).map(v => v.innerText)];
}
return null;
"""
