"""The shape of the house: no import cycles, thin stage scripts, torch-free settings, a README that matches the tree."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT


def _modules() -> dict[str, Path]:
    out = {}
    for p in (ROOT / "pipeline").rglob("*.py"):
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = p
    return out


def import_graph() -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
    """(module -> the pipeline modules it imports, anywhere in the file), and the imports made inside functions."""
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    nested = []
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            for t in targets:
                if t in mods and t != m:
                    edges[m].add(t)
                    if node.col_offset:
                        nested.append((m, t))
    return edges, nested


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    found, state = [], {}

    def visit(u: str, path: list[str]) -> None:
        state[u] = "open"
        for v in sorted(edges[u]):
            if state.get(v) == "open":
                found.append(path[path.index(v):] + [v])
            elif v not in state:
                visit(v, path + [v])
        state[u] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    return found


def test_no_import_cycles_and_no_import_hidden_in_a_function():
    edges, nested = import_graph()
    assert sum(map(len, edges.values())) > 50  # the graph really was read
    assert cycles(edges) == []
    assert nested == []  # an import inside a function to dodge a cycle is the same cycle


def room(module: str) -> str:
    """A module's room: its package below ``pipeline`` (``data``, ``stages``), or the top-level module itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floors() -> dict[str, int]:
    """Each room's floor: one above the highest room it imports (a room that imports none: floor 0)."""
    edges, _ = import_graph()
    rooms: dict[str, set[str]] = {}
    for m, targets in edges.items():
        rooms.setdefault(room(m), set()).update(room(t) for t in targets if room(t) != room(m))
    assert cycles(rooms) == [], "an arrow runs from a lower floor back up"
    out: dict[str, int] = {}

    def floor(r: str) -> int:
        if r not in out:
            out[r] = 1 + max((floor(t) for t in rooms[r]), default=-1)
        return out[r]

    for r in rooms:
        floor(r)
    return out


def test_the_house_points_one_way():
    """Rooms (pipeline's packages and top-level modules) import only rooms on lower floors: the settings low,
    the library's parts above them, the architecture registry above the parts it names, the stages on top."""
    f = floors()

    def above(a: str, *rooms: str) -> bool:
        return all(f[a] > f[r] for r in rooms)

    assert above("settings", "names", "model_config", "values", "errors")
    assert above("data", "settings") and above("model", "data") and "model" not in _imports("data")
    assert above("architectures", "model", "pretrain", "zero_shot", "finetune")
    assert f["stages"] == max(f.values())  # nothing imports a stage's run but its script
    assert _imports("settings") <= {"errors", "values", "names", "model_config"}
    assert _imports("model") <= {"errors", "io", "values", "names", "model_config", "data"}


def _imports(r: str) -> set[str]:
    edges, _ = import_graph()
    return {room(t) for m, targets in edges.items() if room(m) == r for t in targets} - {r}


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]


def test_settings_and_their_owners_load_without_torch():
    """The validator and the modules that own the names a setting may take never import torch."""
    code = ("import sys, pipeline.config, pipeline.finetune.modes, pipeline.model_config, pipeline.optim, "
            "pipeline.model_config; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("script", sorted((ROOT / "stages").glob("[a-z]*.py")), ids=lambda p: p.stem)
def test_stage_scripts_are_a_few_lines_calling_their_run(script):
    text = script.read_text(encoding="utf-8")
    code = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith(("#", '"""'))]
    assert len(code) <= 12, script
    assert f'run_stage("{script.stem}", run, cfg)' in text


def test_only_the_configuration_floor_reads_the_composed_config():
    """One rule (pipeline/stage.py): the stages' `run(lab)` receive the checked settings; only composing,
    checking and rewriting the config (a variant's, a grid's) touch the composed config itself."""
    readers = {p.relative_to(ROOT).as_posix() for p in (ROOT / "pipeline").rglob("*.py")
               if "omegaconf" in p.read_text(encoding="utf-8").lower()}
    assert readers == {"pipeline/config.py", "pipeline/stage.py", "pipeline/variants.py", "pipeline/settings/base.py",
                       "pipeline/check_conf.py"}
    stages = sorted((ROOT / "pipeline" / "stages").glob("[a-z]*.py"))
    assert {p.stem for p in stages} == {p.stem for p in (ROOT / "stages").glob("[a-z]*.py")}
    for path in stages:
        run = next(n for n in ast.parse(path.read_text(encoding="utf-8")).body
                   if isinstance(n, ast.FunctionDef) and n.name == "run")
        assert [ast.unparse(a.annotation) for a in run.args.args] == ["Lab"], path


def test_readme_layout_names_every_folder_and_module_that_exists():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Layout", 1)[1].split("```", 2)[1]
    named = set(re.findall(r"[\w/]+\.py|[\w]+/", block))
    for folder in ("pipeline/data", "pipeline/model", "pipeline/pretrain", "pipeline/finetune",
                   "pipeline/finetune/tasks", "pipeline/report", "pipeline/stages"):
        assert f"{folder.rsplit('/', 1)[-1]}/" in named, folder
        for p in (ROOT / folder).glob("*.py"):
            if p.name != "__init__.py":
                assert p.name in block, p
    # every module the block names exists (searched in the project's code, not in .venv or data)
    code = [p.relative_to(ROOT).as_posix() for top in ("pipeline", "stages", "hydra_plugins", "benchmarks", "tests")
            for p in (ROOT / top).rglob("*.py")]
    for word in named:
        if word.endswith(".py"):
            assert any(f == word or f.endswith(f"/{word}") for f in code), word


def _slug(heading: str) -> str:
    """A Markdown heading's anchor as GitHub writes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_readme_is_a_front_door_whose_links_into_docs_resolve():
    """At most 250 lines, the newcomer's sections in order, and every page of docs/ linked, each link alive."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    headings = re.findall(r"^## (.+)$", readme, re.M)
    order = ["Quick start", "Layout", "The pipeline", "Configuration", "Results at a glance", "Documentation"]
    assert [h for h in headings if h in order] == order
    links = re.findall(r"\]\(((?!https?:|#|mailto:)[^)\s]+)\)", readme)
    assert {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")} <= {l.split("#")[0] for l in links}
    for link in links:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.is_file(), link
        if anchor:
            text = target.read_text(encoding="utf-8")
            assert anchor in {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}, link
