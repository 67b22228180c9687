"""Fine-tuning task loaders: the demo task's split, GLUE files with their quirks, clear errors."""
from __future__ import annotations

import pytest

from pipeline.corpus import in_valid_split
from pipeline.errors import DataError
from pipeline.tasks import bible_sections, glue
from pipeline.tasks.bible import SECTIONS, book_sections

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
    ("sentence\tlabel\ngood\t1\nbad\t0\textra\n", r"train.tsv:3: 3 tab-separated columns, expected 2"),
    ("sentence\tlabel\ngood\tpositive\n", r"label 'positive' is not one of \['0', '1'\]"),
    ("text\tlabel\ngood\t1\n", r"missing \['sentence'\]"),
    ("sentence\tlabel\n", "no examples"),
])
def test_glue_bad_files(tmp_path, train, message):
    _write(tmp_path, "SST-2", train)
    with pytest.raises(DataError, match=message):
        glue("SST-2", str(tmp_path))


def test_unknown_task_lists_known_ones(tmp_path):
    with pytest.raises(DataError, match="known: SST-2, MRPC"):
        glue("SST-3", str(tmp_path))
