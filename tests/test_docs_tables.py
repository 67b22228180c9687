"""The docs' generated tables agree with the recorded benchmark results (benchmarks/docs_tables.py)."""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    """A module of benchmarks/ (not a package), imported by path."""
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module                     # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


docs_tables = _load("docs_tables")


def _copy(tmp_path: Path) -> Path:
    """The generated tables' pages and records copied under ``tmp_path``, laid out as in the repository."""
    for t in docs_tables.TABLES:
        (tmp_path / t.page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / t.page, tmp_path / t.page)
        for p in ROOT.glob(t.records):
            (tmp_path / p.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(p, tmp_path / p.relative_to(ROOT))
    return tmp_path


def test_committed_docs_agree_with_committed_records():
    assert docs_tables.check(ROOT) == []


def test_a_changed_record_fails_the_check_naming_the_page_and_rewriting_fixes_it(tmp_path):
    root = _copy(tmp_path)
    table = docs_tables.TABLES[0]
    record = sorted(root.glob(table.records))[0]
    data = json.loads(record.read_text())
    data["result"]["ours_tok_s"] = data["result"]["ours_tok_s"] * 2 + 1
    record.write_text(json.dumps(data))
    problems = docs_tables.check(root)
    assert len(problems) == 1 and problems[0].startswith(f"{table.page}: ") and table.records in problems[0]
    assert docs_tables.write(root) == [table.page]
    assert docs_tables.check(root) == []
    assert f"{data['result']['ours_tok_s']:,.0f} tokens/s" in (root / table.page).read_text()


def test_a_hand_edit_inside_the_markers_fails_the_check(tmp_path):
    root = _copy(tmp_path)
    page = root / docs_tables.TABLES[0].page
    page.write_text(page.read_text().replace(docs_tables.END, "| an edited row |\n" + docs_tables.END, 1))
    assert [p.split(":")[0] for p in docs_tables.check(root)] == [docs_tables.TABLES[0].page]


def test_a_missing_marker_or_record_field_is_named(tmp_path):
    root = _copy(tmp_path)
    table = docs_tables.TABLES[0]
    record = sorted(root.glob(table.records))[0]
    original = record.read_text()
    data = json.loads(original)
    del data["result"]["hf_tok_s"]
    record.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=re.escape(f"{record.relative_to(root)}: expected key 'result.hf_tok_s'")):
        docs_tables.check(root)
    record.write_text(original)
    page = root / table.page
    page.write_text(page.read_text().replace(table.begin, ""))
    with pytest.raises(ValueError, match=re.escape(f"{table.page}: expected the marker line")):
        docs_tables.check(root)
