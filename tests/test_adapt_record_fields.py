"""The record fields adapt's decisions read are typed (sentune.adaptation.records): the best checkpoint SED and wise
build on, the race's check that stopped a candidate (the report's note, a resumed run's rows), wise's mix. On disk they
are the flat keys of candidate.json, as earlier versions wrote them, so a resumed run reads those back."""

from __future__ import annotations

import json

import pytest

from sentune.adaptation.records import BestCheckpoint, CandidateRecord, RaceCheck, RecordError, load_record, record_path

# candidate.json as the sentune before the typed fields wrote it: a candidate the race stopped after round 2
STOPPED_BEFORE = {
    "name": "ct",
    "kind": "trained",
    "seconds": 12.5,
    "peak_memory_mib": 900.0,
    "stopped": {"reason": "in the lower half of the race", "at_step": 10, "best_step": 8},
    "run": "candidates/ct/run",
    "setting": "adapt/ct",
    "recipe": {"training": {"eval_steps": 4}},
    "best_checkpoint": {"step": 8, "dev_score": 71.5},
    "selection_only": True,
    "race": {"round": 2, "steps": 40, "rows": {"dev": 60, "train": 500}, "unit": "pairs", "rows_digest": "abc", "score": 70.1},
    "reads_tokens": 64,
    "dev_score": 71.5,
}
WISE_BEFORE = {"name": "wise", "kind": "wise", "seconds": 3.0, "peak_memory_mib": None, "source": "ct", "mix": 0.8, "curve": [[0.8, 72.0]], "dev_score": 72.0}
# a supervised candidate's `race` is its race's summary, not a stop: it stays what only the report reads
SUPERVISED_BEFORE = {
    "name": "supervised",
    "kind": "supervised",
    "seconds": 4.0,
    "peak_memory_mib": None,
    "race": {"held_units": 17, "folds": 3, "scores": {"supervised": 1.0}},
}
TRAINED_BEFORE = {
    "name": "simcse",
    "kind": "trained",
    "seconds": 30.0,
    "peak_memory_mib": 800.0,
    "run": "candidates/simcse/run",
    "best_checkpoint": {"step": 12, "dev_score": 73.0, "dev_metric": "spearman", "dev_spearman": 73.0},
    "dev_score": 73.0,
}


def test_a_record_written_before_the_typed_fields_loads_into_them_and_writes_the_same_json(tmp_path):
    for saved in (STOPPED_BEFORE, WISE_BEFORE, TRAINED_BEFORE, SUPERVISED_BEFORE):
        folder = tmp_path / saved["name"]
        folder.mkdir()
        record_path(folder).write_text(json.dumps(saved))
        record = load_record(folder)
        assert record.to_dict() == saved
        assert CandidateRecord.from_dict(record.to_dict()) == record
    stopped = load_record(tmp_path / "ct")
    assert stopped.race == RaceCheck(2, 40, {"dev": 60, "train": 500}, "pairs", "abc", 70.1)
    assert stopped.best_checkpoint == BestCheckpoint(8, 71.5) and stopped.best_step == 8
    assert "race" not in stopped.detail and "best_checkpoint" not in stopped.detail  # what decisions read is typed
    assert load_record(tmp_path / "wise").mix == 0.8 and "mix" not in load_record(tmp_path / "wise").detail
    assert load_record(tmp_path / "supervised").race is None and load_record(tmp_path / "supervised").detail["race"]["folds"] == 3
    assert load_record(tmp_path / "simcse").best_checkpoint == BestCheckpoint(12, 73.0, {"dev_metric": "spearman", "dev_spearman": 73.0})


def test_a_record_this_sentune_cannot_read_is_refused_naming_its_file(tmp_path):
    record_path(tmp_path).write_text(json.dumps({**STOPPED_BEFORE, "race": {"round": 2}}))
    with pytest.raises(RecordError, match=r"candidate\.json: not a candidate record this sentune reads \(KeyError: 'steps'\); remove "):
        load_record(tmp_path)
