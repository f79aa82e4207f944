"""Question-pair loaders, the leak-free split and the transfer groups (tiny fixture files)."""

from __future__ import annotations

import json

import pytest

from medrank.data.errors import DataFormatError
from medrank.data.questions import (
    QuestionPair,
    connected_components,
    load_pairs_jsonl,
    load_question_pairs,
    question_groups,
    split_pairs,
    unique_questions,
    write_pairs_jsonl,
)


def write_chip(tmp_path, records):
    d = tmp_path / "chip-sts"
    d.mkdir(parents=True, exist_ok=True)
    (d / "CHIP-STS_train.json").write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    return tmp_path


def test_chip_sts_loader(tmp_path):
    root = write_chip(tmp_path, [
        {"id": "1", "text1": " 糖尿病 怎么治 ", "text2": "糖尿病的治疗", "label": "1", "category": "diabetes"},
        {"id": "2", "text1": "高血压吃什么", "text2": "乳腺癌早期症状", "label": "0", "category": "hypertension"},
    ])
    pairs = load_question_pairs("chip-sts", root)
    assert [p.id for p in pairs] == ["chip-sts:1", "chip-sts:2"]
    assert pairs[0].text1 == "糖尿病 怎么治" and pairs[0].label == 1 and pairs[0].grade == 1
    assert pairs[1].meta["category"] == "hypertension"
    # a file path works too (the --test route) and gets file-specific ids
    other = tmp_path / "dev.json"
    other.write_text(json.dumps([{"id": "9", "text1": "a", "text2": "b", "label": "0"}]), encoding="utf-8")
    assert load_question_pairs("chip-sts", other)[0].id == "chip-sts/dev:9"


@pytest.mark.parametrize("bad, message", [
    ({"id": "1", "text1": "a", "label": "1"}, "field 'text2' missing"),
    ({"id": "1", "text1": "a", "text2": "b", "label": "2"}, "label must be '0' or '1'"),
    ({"id": "1", "text1": "  ", "text2": "b", "label": "1"}, "empty question text"),
])
def test_chip_sts_bad_records(tmp_path, bad, message):
    root = write_chip(tmp_path, [bad])
    with pytest.raises(DataFormatError, match=message):
        load_question_pairs("chip-sts", root)


def test_kuake_grades(tmp_path):
    d = tmp_path / "kuake-qqr"
    d.mkdir()
    recs = [{"id": f"s{i}", "query1": "头痛", "query2": f"头痛{i}", "label": str(i)} for i in range(3)]
    (d / "KUAKE-QQR_train.json").write_text(json.dumps(recs, ensure_ascii=False), encoding="utf-8")
    pairs = load_question_pairs("kuake-qqr", tmp_path)
    assert [(p.label, p.grade) for p in pairs] == [(0, 0), (0, 1), (1, 2)]


def test_mqp_and_rqe(tmp_path):
    d = tmp_path / "medical-question-pairs"
    d.mkdir()
    (d / "mqp.csv").write_text('1,"Is it bad, doc?",Is it harmful?,1\r\n1,Is it bad?,What is aspirin?,0\r\n', encoding="utf-8")
    pairs = load_question_pairs("medical-question-pairs", tmp_path)
    assert pairs[0].text1 == "Is it bad, doc?" and pairs[0].id == "medical-question-pairs:1"
    assert pairs[1].id == "medical-question-pairs:2" and pairs[1].meta["dr_id"] == "1"
    (d / "mqp.csv").write_text("1,a,b\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"mqp.csv:1: expected 4 columns"):
        load_question_pairs("medical-question-pairs", tmp_path)

    r = tmp_path / "rqe"
    r.mkdir()
    (r / "RQE_Train_8588_AMIA2016.xml").write_text(
        '<RQE-med-train><pair pid="1" type="originalQ-shortQ" value="true"><chq>\n  How to treat X?\n</chq>'
        '<faq> Treatment of X? </faq></pair><pair pid="2" value="false"><chq>How to treat X?</chq><faq>\n</faq></pair>'
        '<pair pid="3" value="false"><chq>How to treat X?</chq><faq>What is Y?</faq></pair></RQE-med-train>',
        encoding="utf-8",
    )
    pairs = load_question_pairs("rqe", tmp_path)
    assert [(p.id, p.text1, p.text2, p.label) for p in pairs] == [
        ("rqe:1", "How to treat X?", "Treatment of X?", 1), ("rqe:3", "How to treat X?", "What is Y?", 0)]


def test_missing_dataset_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_question_pairs("chip-sts", tmp_path)
    with pytest.raises(KeyError, match="unknown question-pair dataset"):
        load_question_pairs("nope", tmp_path)


def _pairs(edges):
    return [QuestionPair(f"p{i}", a, b, lab) for i, (a, b, lab) in enumerate(edges)]


def test_split_keeps_question_texts_on_one_side():
    edges = [(f"q{i}", f"q{i + 1}", i % 2) for i in range(0, 200, 2)]  # 100 disjoint components
    edges += [("q0", "q3", 0), ("q10", "q11", 1)]  # merges two components; a duplicate edge
    pairs = _pairs(edges)
    train, valid, dropped = split_pairs(pairs, 0.2, seed=13)
    assert not dropped
    assert len(train) + len(valid) == len(pairs)
    assert not set(unique_questions(train)) & set(unique_questions(valid))
    assert 20 <= len(valid) <= 23
    again = split_pairs(pairs, 0.2, seed=13)
    assert [p.id for p in again.valid] == [p.id for p in valid]
    assert [p.id for p in split_pairs(pairs, 0.2, seed=14).valid] != [p.id for p in valid]


def test_split_breaks_a_giant_component_and_drops_straddling_pairs():
    # RQE-like: each question has a positive partner, negatives link everything into one component
    pos = [(f"c{i}", f"f{i}", 1) for i in range(50)]
    neg = [(f"c{i}", f"f{(i + 1) % 50}", 0) for i in range(50)]
    pairs = _pairs(pos + neg)
    train, valid, dropped = split_pairs(pairs, 0.2, seed=1)
    assert valid and train and dropped
    assert all(p.label == 0 for p in dropped)
    assert not set(unique_questions(train)) & set(unique_questions(valid))
    assert len(train) + len(valid) + len(dropped) == len(pairs)


def test_split_validates():
    with pytest.raises(ValueError, match="valid_fraction"):
        split_pairs(_pairs([("a", "b", 1)]), 1.5)
    with pytest.raises(ValueError, match="no pairs"):
        split_pairs([], 0.2)


def test_groups_are_components_of_positive_pairs():
    pairs = _pairs([("a", "b", 1), ("b", "c", 1), ("c", "d", 0), ("e", "f", 1), ("g", "g", 1), ("h", "i", 0)])
    assert question_groups(pairs) == [["a", "b", "c"], ["e", "f"]]
    assert connected_components([("x", "y")], nodes=["z"]) == [["x", "y"], ["z"]]


def test_pairs_jsonl_roundtrip(tmp_path):
    pairs = [QuestionPair("g1", "a?", "b?", 1, meta={"score": 0.93}), QuestionPair("g2", "a?", "c?", 0)]
    path = tmp_path / "p.jsonl"
    assert write_pairs_jsonl(pairs, path) == 2
    back = load_pairs_jsonl(path)
    assert [(p.id, p.text1, p.text2, p.label) for p in back] == [("g1", "a?", "b?", 1), ("g2", "a?", "c?", 0)]
    assert back[0].meta["score"] == 0.93
    path.write_text('{"text1": "a"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"p.jsonl:1: field 'text2' missing"):
        load_pairs_jsonl(path)


def test_question_pair_validation():
    with pytest.raises(ValueError, match="label must be 0 or 1"):
        QuestionPair("x", "a", "b", 2)
    with pytest.raises(ValueError, match="text2 must be a non-empty string"):
        QuestionPair("x", "a", " ", 1)


def test_question_inputs_are_checked(tmp_path):
    from medrank.pipelines.similar.corpus import read_question_file
    from medrank.pipelines.similar.pairs import PairGenerationConfig

    with pytest.raises(IsADirectoryError, match="is a folder"):
        read_question_file(tmp_path)
    with pytest.raises(ValueError, match="n_queries must be >= 1"):
        PairGenerationConfig(n_queries=0)
