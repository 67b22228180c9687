"""Fine-tuning task loaders: the demo task's split, GLUE files with their quirks, clear errors."""
from __future__ import annotations

import hydra
import pytest

from pipeline.data.corpus import in_valid_split
from pipeline.errors import DataError
from pipeline.finetune.tasks import bible_sections, glue, reported_metrics
from pipeline.finetune.tasks.bible import SECTIONS, book_sections

from conftest import shared_data


def test_bible_sections_split_by_chapter():
    task = bible_sections(train_size=None, dev_size=None, valid_fraction=0.1, split_seed=1234)
    assert len(task.train) + len(task.dev) == 31103
    assert task.labels == list(SECTIONS) and len(SECTIONS) == 7
    assert {e.label for e in task.dev} == set(range(7)) or len({e.label for e in task.dev}) >= 6
    sections = book_sections()
    assert sections["Genesis"] == 0 and sections["Deuteronomy"] == 0 and sections["Esther"] == 1
    assert sections["Malachi"] == 3 and sections["Acts"] == 4 and sections["Jude"] == 5
    assert sections["Revelation"] == 6
    small = bible_sections(train_size=2000, dev_size=500, valid_fraction=0.1, split_seed=1234)
    assert len(small.train) == 2000 and len(small.dev) == 500
    assert not {e.text_a for e in small.dev} & {e.text_a for e in task.train} - {e.text_a for e in task.dev}
    assert in_valid_split("Genesis 1", 0.1, 1234) in (True, False)


def test_glue_sst2_and_mrpc_read_in_full():
    data = shared_data("glue")
    sst = glue("SST-2", str(data))
    assert (len(sst.train), len(sst.dev)) == (67349, 872)
    assert sum(e.label for e in sst.dev) == 444
    mrpc = glue("MRPC", str(data))
    assert (len(mrpc.train), len(mrpc.dev)) == (3668, 408)
    assert sum(e.label for e in mrpc.train) == 2474
    assert all(e.text_b for e in mrpc.dev)
    assert any('"' in e.text_a or '"' in e.text_b for e in mrpc.train)  # bare quotes kept


def _write(tmp_path, name, train, dev="sentence\tlabel\nok\t1\n"):
    (tmp_path / name).mkdir()
    (tmp_path / name / "train.tsv").write_text(train)
    (tmp_path / name / "dev.tsv").write_text(dev)


@pytest.mark.parametrize("train, message", [
    ("sentence\tlabel\ngood\t1\nbad\t0\textra\n", r"train.tsv:3: 3 columns, expected 2 as in the header"),
    ("sentence\tlabel\ngood\tpositive\n", r"label 'positive' is not one of \['0', '1'\]"),
    ("text\tlabel\ngood\t1\n", r"train.tsv:2: no column 'sentence'"),
    ("sentence\tlabel\n", "no examples"),
])
def test_glue_bad_files(tmp_path, train, message):
    _write(tmp_path, "SST-2", train)
    with pytest.raises(DataError, match=message):
        glue("SST-2", str(tmp_path))


def test_unknown_task_lists_known_ones(tmp_path):
    with pytest.raises(DataError, match="the tasks are: CoLA, SST-2, MRPC, STS-B, QQP, MNLI-m, MNLI-mm, QNLI, RTE, WNLI"):
        glue("SST-3", str(tmp_path))


# Two rows per split in each task's real layout (headers and column orders as GLUE ships them).
GLUE_LAYOUTS = {
    "CoLA": ("gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\tThey drank the pub.\n", None),
    "STS-B": ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
              "0\tmain\tf\t2012\t1\tnone\tnone\tA plane is taking off.\tAn air plane is taking off.\t5.000\n"
              "1\tmain\tf\t2012\t4\tnone\tnone\tA man plays.\tA dog runs.\t0.500\n", None),
    "QQP": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t1\t2\tHow?\tHow so?\t1\n"
            "2\t3\t4\tWhy?\tWhen?\t0\n", None),
    "MNLI-m": ("index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tgold_label\n"
               "0\t1\t1n\tgov\tA cat sat.\tAn animal sat.\tentailment\n1\t2\t2c\tgov\tIt rains.\tIt is dry.\tcontradiction\n",
               "dev_matched.tsv"),
    "MNLI-mm": ("index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tgold_label\n"
                "0\t1\t1n\tgov\tA cat sat.\tAn animal sat.\tneutral\n1\t2\t2c\tgov\tIt rains.\tIt is dry.\tcontradiction\n",
                "dev_mismatched.tsv"),
    "QNLI": ("index\tquestion\tsentence\tlabel\n0\tWho?\tHe did.\tentailment\n1\tWhen?\tHe did.\tnot_entailment\n", None),
    "RTE": ("index\tsentence1\tsentence2\tlabel\n0\tA b.\tA.\tentailment\n1\tC d.\tE.\tnot_entailment\n", None),
    "WNLI": ("index\tsentence1\tsentence2\tlabel\n0\tI saw it.\tIt was seen.\t1\n1\tX.\tY.\t0\n", None),
}


@pytest.mark.parametrize("name", list(GLUE_LAYOUTS))
def test_every_glue_task_reads_its_layout_with_its_metric(tmp_path, name):
    from pipeline.finetune.tasks import GLUE_TASKS

    text, dev_file = GLUE_LAYOUTS[name]
    folder = tmp_path / GLUE_TASKS[name].folder
    folder.mkdir()
    (folder / "train.tsv").write_text(text, encoding="utf-8")
    (folder / (dev_file or "dev.tsv")).write_text(text, encoding="utf-8")
    task = glue(name, str(tmp_path))
    assert len(task.train) == len(task.dev) == 2
    expected = {"CoLA": ["matthews"], "STS-B": ["pearson", "spearman"], "QQP": ["f1", "accuracy"]}
    assert task.metrics == expected.get(name, ["accuracy"])
    if name == "STS-B":
        assert task.regression and [e.label for e in task.train] == [5.0, 0.5] and task.num_outputs == 1
    else:
        assert all(isinstance(e.label, int) for e in task.train) and task.num_outputs == len(task.labels)
    assert (task.train[0].text_b is None) == (name == "CoLA")
    if name == "CoLA":
        assert task.train[0].text_a == "Our friends won't buy this analysis." and task.train[1].label == 0


def test_scores_are_the_official_metrics():
    from pipeline.finetune.tasks import score

    got = score(["accuracy", "f1", "matthews"], [1, 1, 0, 0, 1], [1, 0, 0, 0, 1], 2)
    assert got["accuracy"] == pytest.approx(0.8) and got["f1"] == pytest.approx(0.8)
    assert got["matthews"] == pytest.approx((2 * 2 - 1 * 0) / ((3 * 2 * 2 * 3) ** 0.5), abs=1e-6)
    corr = score(["pearson", "spearman"], [0.1, 0.4, 0.3, 0.9], [0.0, 0.5, 0.4, 1.0], 2)
    assert corr["spearman"] == pytest.approx(1.0, abs=1e-5) and 0.95 < corr["pearson"] < 1.0


# --------------------------------------------------------------------------- #
# Your own files
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl"])
@pytest.mark.parametrize("header", [True, False])
def test_custom_files_in_every_format_by_column_mapping(tmp_path, fmt, header):
    import csv
    import json

    from pipeline.finetune.tasks import table

    rows = [("Great film, \"truly\".", "It is good.", "pos"), ("Dull; long", "It is bad.", "neg"),
            ("Fine", "Meh", "neu")]
    if fmt == "jsonl" and not header:
        pytest.skip("JSONL rows are keyed by name")
    for split in ("train", "dev"):
        f = tmp_path / f"{split}.{fmt}"
        with open(f, "w", encoding="utf-8", newline="") as out:
            if fmt == "jsonl":
                for a, b, y in rows:
                    out.write(json.dumps({"premise": a, "hypothesis": b, "stars": y}) + "\n")
            elif fmt == "csv":
                w = csv.writer(out)
                if header:
                    w.writerow(["premise", "hypothesis", "stars"])
                w.writerows(rows)
            else:
                if header:
                    out.write("premise\thypothesis\tstars\n")
                out.writelines("\t".join(r) + "\n" for r in rows)
    cols = dict(text_a="premise", text_b="hypothesis", label="stars") if header else dict(text_a=0, text_b=1, label=2)
    cols["header"] = header
    task = table("mine", str(tmp_path / f"train.{fmt}"), str(tmp_path / f"dev.{fmt}"), **cols)
    assert task.labels == ["neg", "neu", "pos"] and [e.label for e in task.train] == [2, 0, 1]
    assert task.train[0].text_a == 'Great film, "truly".' and task.train[1].text_b == "It is bad."
    ordered = table("mine", str(tmp_path / f"train.{fmt}"), str(tmp_path / f"dev.{fmt}"), labels=["pos", "neu", "neg"],
                    **cols)
    assert [e.label for e in ordered.dev] == [0, 2, 1]


def test_custom_regression_and_numeric_labels(tmp_path):
    from pipeline.finetune.tasks import table

    (tmp_path / "t.csv").write_text("text,score\nvery good,4.5\nbad,1\n", encoding="utf-8")
    task = table("reg", str(tmp_path / "t.csv"), str(tmp_path / "t.csv"), text_a="text", label="score", regression=True)
    assert task.regression and task.metrics == ["pearson", "spearman"] and [e.label for e in task.dev] == [4.5, 1.0]
    (tmp_path / "n.csv").write_text("text,y\na,10\nb,2\nc,2\n", encoding="utf-8")
    task = table("num", str(tmp_path / "n.csv"), str(tmp_path / "n.csv"), text_a="text", label="y")
    assert task.labels == ["2", "10"] and [e.label for e in task.train] == [1, 0, 0]


@pytest.mark.parametrize("content, kw, message", [
    ("text,label\na,1\nb,2,3\n", {}, r"t.csv:3: 3 columns, expected 2"),
    ("text,label\na,1\n", {"labels": ["0"]}, r"t.csv:2: label '1' is not one of \['0'\]"),
    ("text,label\n", {}, r"t.csv: no examples \(the split is empty\)"),
    ("txt,label\na,1\n", {}, r"t.csv:2: no column 'text'"),
    ("text,label\na,x\n", {"regression": True}, r"label 'x' is not a number"),
])
def test_custom_file_errors_name_file_line_and_expectation(tmp_path, content, kw, message):
    from pipeline.finetune.tasks import table

    (tmp_path / "t.csv").write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        table("t", str(tmp_path / "t.csv"), str(tmp_path / "t.csv"), text_a="text", label="label", **kw)


def test_hugging_face_datasets_from_a_local_copy(tmp_path):
    import datasets

    from pipeline.finetune.tasks import hf_dataset

    features = datasets.Features({"sentence": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["negative", "positive"])})
    dd = datasets.DatasetDict({
        "train": datasets.Dataset.from_dict({"sentence": ["good", "bad", "great"], "label": [1, 0, 1]}, features=features),
        "validation": datasets.Dataset.from_dict({"sentence": ["fine", "awful"], "label": [1, 0]}, features=features),
    })
    dd.save_to_disk(str(tmp_path / "sst"))
    task = hf_dataset("sst-local", str(tmp_path / "sst"), text_a="sentence", label="label")
    assert task.labels == ["negative", "positive"] and [e.label for e in task.train] == [1, 0, 1]
    assert [e.text_a for e in task.dev] == ["fine", "awful"]
    with pytest.raises(DataError, match="no column 'text'"):
        hf_dataset("x", str(tmp_path / "sst"), text_a="text", label="label")
    with pytest.raises(DataError, match="no split 'dev'"):
        hf_dataset("x", str(tmp_path / "sst"), text_a="sentence", label="label", dev_split="dev")
    # A builder on local files, as load_dataset takes them.
    (tmp_path / "t.jsonl").write_text('{"q": "a", "y": 2.5}\n{"q": "b", "y": 1.0}\n', encoding="utf-8")
    reg = hf_dataset("json-local", "json", data_files={"train": str(tmp_path / "t.jsonl"),
                                                       "validation": str(tmp_path / "t.jsonl")},
                     text_a="q", label="y", regression=True)
    assert reg.regression and [e.label for e in reg.dev] == [2.5, 1.0]


def test_the_metrics_a_suite_column_is_checked_against_at_start_up_are_those_the_loader_reports(tmp_path):
    _write(tmp_path, "SST-2", "sentence\tlabel\ngood\t1\nbad\t0\n")
    (tmp_path / "t.tsv").write_text("text\tscore\na\t0.5\nb\t1.5\n")
    settings = [{"_target_": "pipeline.finetune.tasks.glue", "name": "SST-2", "data_dir": str(tmp_path)},
                {"_target_": "pipeline.finetune.tasks.table", "name": "t", "train": str(tmp_path / "t.tsv"),
                 "dev": str(tmp_path / "t.tsv"), "text_a": "text", "label": "score", "regression": True},
                {"_target_": "pipeline.finetune.tasks.table", "name": "t", "train": str(tmp_path / "t.tsv"),
                 "dev": str(tmp_path / "t.tsv"), "text_a": "text", "label": "score", "regression": True,
                 "metrics": ["spearman"]}]
    for data in settings:
        task = hydra.utils.instantiate(data)
        assert reported_metrics(data) == task.metrics, data
    assert reported_metrics({"_target_": "elsewhere.loader"}) is None  # only its data can tell: checked at report time
