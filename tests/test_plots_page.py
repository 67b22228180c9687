"""`dvc plots show` offline: the plots_page stage's template, where DVC finds it, and its page in a real browser
with no network."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, chromedriver
from pipeline.plots_page import TEMPLATE, write_template

DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plots_page") / "template.html"
    write_template(path)
    return path


def test_dvc_reads_the_template_the_stage_writes(template):
    """.dvc/config's plots.html_template (DVC reads it relative to .dvc/) is the plots_page stage's output and
    the module's path; the template fills only DVC's plots, none of its CDN script tags, and loads nothing."""
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        configured = Path(repo.dvc_dir, repo.config["plots"]["html_template"]).resolve()
    [out] = [next(iter(o)) if isinstance(o, dict) else o for o in DVC["stages"]["plots_page"]["outs"]]
    assert configured == (ROOT / out).resolve() == TEMPLATE
    page = template.read_text(encoding="utf-8")
    assert page.count("{plot_divs}") == 1 and "{scripts}" not in page
    assert re.findall(r"<script\b[^>]*>", page) == ["<script>"] and "window.vegaEmbed" in page


def _plots_project(root: Path, template: Path) -> Path:
    """A DVC project with the lab's top-level plots, .dvc/config and the template, and a few rows of each curve
    they draw."""
    root.mkdir()
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=root, env=_env(root), check=True)
    (root / ".dvc" / "config").write_text((ROOT / ".dvc" / "config").read_text())
    (root / "dvc.yaml").write_text(yaml.safe_dump({"plots": DVC["plots"]}))
    (root / "plots").mkdir()
    for split, gap in (("train", 0.0), ("val", 0.02)):
        rows = [f"{s},{7 + 10 * gap - s / 100:.2f},{0.05 + s / 1000 - gap:.3f},{0.5 + s / 2000 - gap:.3f}"
                for s in range(0, 500, 100)]
        (root / "plots" / f"pretrain_{split}.csv").write_text("\n".join(["step,loss,mlm_acc,nsp_acc", *rows]) + "\n")
    (root / "dvc_plots").mkdir()
    (root / "dvc_plots" / "template.html").write_bytes(template.read_bytes())
    return root


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DVC_")}
    return {**env, "HOME": str(root.parent), "DVC_NO_ANALYTICS": "1"}  # no user config, no analytics request


def test_dvc_plots_show_draws_every_plot_with_no_network(template, tmp_path):
    """`dvc plots show` on a few rows of the curves, its page opened in headless Chromium behind a proxy that
    answers nothing: every plot of dvc.yaml drawn, no request made, no error on the console. (Warnings there are
    vega's own: DVC's hover layer starts empty, and its Vega-Lite 5 specs compile to Vega 5, run on Vega 6.)"""
    driver_path = chromedriver()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    project = _plots_project(tmp_path / "project", template)
    shown = subprocess.run([sys.executable, "-m", "dvc", "plots", "show"], cwd=project, env=_env(project),
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    index = project / "dvc_plots" / "index.html"
    html = index.read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]*\bsrc=", html) and "cdn." not in html

    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900",
                "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"):  # a request would fail, loudly
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    try:
        driver.get(index.as_uri())
        charts = "document.querySelectorAll('.vega-embed .marks')"  # the svg or canvas vega draws a chart on
        WebDriverWait(driver, 20).until(lambda d: d.execute_script(f"return {charts}.length") >= len(DVC["plots"]))
        drawn = driver.execute_script(
            f"return Array.from({charts}).map(c => [c.closest('.vega-embed').id, c.clientWidth, c.clientHeight])")
        requests = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        driver.quit()
    assert sorted(d[0] for d in drawn) == sorted(next(iter(p)) for p in DVC["plots"]), drawn
    assert all(width > 100 and height > 100 for _, width, height in drawn), drawn
    assert requests == [] and errors == []
