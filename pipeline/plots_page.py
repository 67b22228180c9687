"""The page ``dvc plots show`` draws the learning curves in, made to work offline (the plots_page stage,
``python -m pipeline.plots_page``; torch-free).

DVC's own page loads vega, vega-lite and vega-embed from a CDN, so without a network it draws nothing. DVC takes
an HTML template instead (``plots.html_template`` in .dvc/config points at ``TEMPLATE``); this one carries the
three libraries in its head, bundled by the installed ``vl-convert-python`` when the stage runs, so the page makes
no network request. A stage's output, so a fresh clone has it after its first ``dvc repro`` (or ``dvc pull``).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import vl_convert

from pipeline.errors import LabError
from pipeline.io import atomic_file

TEMPLATE = Path(__file__).resolve().parent.parent / "dvc_plots" / "template.html"

# dvc_render fills {plot_divs} with one div a plot, whose inline script calls vegaEmbed('#<id>', spec) while the
# page is parsed: the bundle in the head has set window.vegaEmbed (and window.vega, window.vegaLite) by then. DVC
# puts its CDN <script src> tags where a template says {scripts}, so this one does not say it; {refresh_tag} is
# where a refreshing page gets its <meta http-equiv="refresh">. Each placeholder is replaced as plain text.
PAGE = """<!DOCTYPE html>
<html>
<head>
    <meta charset="utf-8">
    {refresh_tag}
    <title>DVC Plot</title>
    <script>
<bundle>
    </script>
    <style>
        table { border-spacing: 15px; }
    </style>
</head>
<body>
    {plot_divs}
</body>
</html>
"""


def vega_lite_version() -> str:
    """The newest Vega-Lite 5 that vl-convert carries: DVC's plot templates are Vega-Lite 5 specs (their
    ``$schema``), read by the version of the language they were written in."""
    fives = [v for v in vl_convert.get_vegalite_versions() if v.startswith("5.")]
    return max(fives, key=lambda v: tuple(int(n) for n in v.split(".")))


def page() -> str:
    """The template: ``PAGE`` with vega, vega-lite and vega-embed inlined. A ``</script`` inside the bundle would
    close the element early, so it is written ``<\\/script`` (the same text inside a JavaScript string)."""
    bundle = vl_convert.javascript_bundle(vl_version=vega_lite_version())
    return PAGE.replace("<bundle>", re.sub(r"</(script)", r"<\\/\1", bundle, flags=re.IGNORECASE))


def write_template(path: Path = TEMPLATE) -> None:
    with atomic_file(path) as f:
        f.write(page())


def main() -> None:
    """The stage: the template at ``TEMPLATE``, or one line naming what went wrong and exit status 2."""
    try:
        write_template()
        print(f"{TEMPLATE}: the page `dvc plots show` fills, with vega inlined (no network needed)")
    except LabError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
