"""The companion notebook's page offers the stored notebook as a download."""

from __future__ import annotations

import json


def test_download_button_downloads_the_notebook(page, site_url):
    page.goto(site_url + "notebook/")
    button = page.get_by_test_id("download-notebook")
    button.wait_for(state="visible")
    with page.expect_download() as info:
        button.click()
    download = info.value
    assert download.suggested_filename == "notebook.ipynb"
    assert json.loads(open(download.path(), encoding="utf-8").read())["nbformat"] == 4
