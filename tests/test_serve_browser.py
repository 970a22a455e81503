"""The search page of `sentune serve` in a real headless browser (Debian's chromium and chromium-driver, driven by
Selenium): the key typed into the page, a query typed and sent with the Enter key, the expected document among the
hits with its score, the system that ranked them and the time taken. Skipped without chromium or Selenium, except
under SENTUNE_REQUIRE_BROWSER=1 (.ci/run sets it after installing them), where their absence fails."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import assert_plot, free_port
from test_adapt_retrieval import _toy_beir
from test_serve import KEY, start_server, stop_server

from sentune.cli import main

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1200,900",
)


def browser_or_skip(profile: Path):
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (pip install 'sentune[serve-test]')")
    if missing:
        if os.environ.get("SENTUNE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"SENTUNE_REQUIRE_BROWSER=1 and missing: {', '.join(missing)}")
        pytest.skip(f"missing: {', '.join(missing)} (apt-get install chromium chromium-driver)")
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager never fetches a driver: the distribution's is given
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.mark.slow
def test_a_query_typed_into_the_page_shows_its_document(tiny_model_dir, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser = browser_or_skip(tmp_path / "profile")
    dev, _ = _toy_beir(tmp_path / "toy")
    index = tmp_path / "index"
    assert main(["index", "--model", str(tiny_model_dir), "--corpus", str(dev / "corpus.jsonl"), "--out", str(index), "--quiet", "--fusion", "convex:0.4"]) == 0
    wanted = json.loads((dev / "corpus.jsonl").read_text().splitlines()[42])
    query = wanted["text"]  # d42's own words: among BM25's first ten
    port = free_port()
    server = start_server([str(index), "--api-key", KEY, "--quiet"], port)
    try:
        browser.get(f"http://127.0.0.1:{port}/")
        wait = WebDriverWait(browser, 30)
        wait.until(ready.text_to_be_present_in_element((By.ID, "about"), "150 documents"))  # its script ran, under its CSP
        header = browser.find_element(By.TAG_NAME, "header").value_of_css_property("background-color")
        assert header in ("rgba(31, 58, 95, 1)", "rgb(31, 58, 95)"), header  # its inline style applied too (#1f3a5f)
        key = browser.find_element(By.ID, "key")
        assert key.is_displayed()  # the server asks for a key: the page shows its field
        key.send_keys(KEY)
        systems = Select(browser.find_element(By.ID, "system"))
        assert [o.get_attribute("value") for o in systems.options] == ["dense", "bm25", "hybrid"]
        assert systems.first_selected_option.get_attribute("value") == "hybrid"  # the index's own
        systems.select_by_value("bm25")
        browser.find_element(By.ID, "query").send_keys(query, Keys.ENTER)
        wait.until(ready.text_to_be_present_in_element((By.ID, "status"), "ranked by bm25"))
        status = browser.find_element(By.ID, "status").text
        assert "ms on the server" in status and "10 documents" in status, status
        hits = browser.find_elements(By.CSS_SELECTOR, "#hits li.hit")
        assert len(hits) == 10
        ids = [hit.find_element(By.CSS_SELECTOR, ".doc").text for hit in hits]
        assert "d42" in ids, ids
        found = hits[ids.index("d42")]
        assert found.find_element(By.CSS_SELECTOR, ".rank").text == f"#{ids.index('d42') + 1}"
        assert found.find_element(By.CSS_SELECTOR, ".score").text.startswith("score ")
        assert found.find_element(By.CSS_SELECTOR, ".text").text == wanted["text"]
        # a wrong key: the page says what the server said
        key.clear()
        key.send_keys("not-the-key")
        browser.find_element(By.ID, "go").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "status"), "401"))
        assert "wrong API key" in browser.find_element(By.ID, "status").text
        shot = tmp_path / "page.png"
        browser.save_screenshot(str(shot))
        assert_plot(shot)
    finally:
        browser.quit()
        stop_server(server)
