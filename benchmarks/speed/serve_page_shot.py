"""A screenshot of `sentune serve`'s search page with a real query's hits, taken in headless Chromium (Debian's
chromium and chromium-driver, driven by Selenium) from a server already running on 127.0.0.1.

    python benchmarks/speed/serve_page_shot.py --url http://127.0.0.1:8101 --query "..." --out benchmarks/results/serving_page.png
"""

from __future__ import annotations

import argparse
import os
import tempfile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--query", required=True)
    parser.add_argument("--system", help="the page's system selector (default: the index's own)")
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--api-key")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import Select, WebDriverWait

    os.environ.setdefault("SE_OFFLINE", "true")
    with tempfile.TemporaryDirectory(prefix="serve-shot-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in (
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--window-size=1280,1000", "--hide-scrollbars", f"--user-data-dir={profile}",
        ):  # fmt: skip
            options.add_argument(flag)
        browser = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            browser.get(args.url)
            wait = WebDriverWait(browser, 60)
            wait.until(ready.text_to_be_present_in_element((By.ID, "about"), "documents"))
            if args.api_key:
                browser.find_element(By.ID, "key").send_keys(args.api_key)
            if args.system:
                Select(browser.find_element(By.ID, "system")).select_by_value(args.system)
            top = browser.find_element(By.ID, "top")
            top.clear()
            top.send_keys(str(args.top))
            browser.find_element(By.ID, "query").send_keys(args.query, Keys.ENTER)
            wait.until(ready.text_to_be_present_in_element((By.ID, "status"), "ranked by"))
            browser.save_screenshot(args.out)
            print(f"{args.out}: {browser.find_element(By.ID, 'status').text}")
        finally:
            browser.quit()


if __name__ == "__main__":
    main()
