from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from medrank.cli import app

TRAIN = [
    {"text": "左膝退变伴游离体", "normalized_result": "膝骨关节病##膝关节游离体"},
    {"text": "头痛.头晕.高血压", "normalized_result": "头痛##头晕##高血压"},
    {"text": "高血压病", "normalized_result": "高血压"},
    {"text": "右乳腺癌IV期", "normalized_result": "乳腺恶性肿瘤##癌"},
    {"text": "偏头痛", "normalized_result": "头痛"},
]
VOCAB = [("M17", "膝骨关节病"), ("M23.4", "膝关节游离体"), ("R51", "头痛"), ("R42", "头晕"),
         ("I10", "高血压"), ("C50", "乳腺恶性肿瘤"), ("M8010/3", "癌"), ("J45", "哮喘")]


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    root = tmp_path / "data"
    (root / "chip-cdn").mkdir(parents=True)
    with open(root / "chip-cdn" / "train.jsonl", "w", encoding="utf-8") as fh:
        for row in TRAIN:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    with open(root / "chip-cdn" / "icd10_beijing_v601.tsv", "w", encoding="utf-8") as fh:
        fh.write("code\tname\n" + "".join(f"{c}\t{n}\n" for c, n in VOCAB))
    monkeypatch.setenv("MEDRANK_DATA", str(root))
    return root


def test_evaluate_writes_json_and_markdown(data_dir, tmp_path):
    report = tmp_path / "out" / "r.json"
    res = CliRunner().invoke(
        app,
        ["--data", str(data_dir), "evaluate", "--dataset", "chip-cdn", "--split", "all",
         "--candidates", "gold", "--method", "bm25", "--report", str(report)],
    )
    assert res.exit_code == 0, res.output
    payload = json.loads(report.read_text())
    metrics = payload["systems"]["bm25"]["metrics"]
    assert payload["n_queries"] == 5 and 0.0 < metrics["ndcg@5"] <= 1.0
    assert "| bm25 |" in report.with_suffix(".md").read_text()


def test_evaluate_any_file_in_visible_format(data_dir, tmp_path):
    test_file = tmp_path / "other.jsonl"
    test_file.write_text(json.dumps({"text": "头晕伴高血压", "normalized_result": "头晕##高血压"}, ensure_ascii=False) + "\n")
    res = CliRunner().invoke(
        app, ["--data", str(data_dir), "evaluate", "--dataset", "chip-cdn", "--test", str(test_file), "--method", "bm25"]
    )
    assert res.exit_code == 0, res.output
    assert "recall@5=1.0000" in res.output  # both gold terms are found in the top 5


def test_index_then_search_roundtrip(data_dir, tmp_path):
    out = tmp_path / "ix"
    runner = CliRunner()
    res = runner.invoke(app, ["--data", str(data_dir), "index", "--dataset", "chip-cdn", "--candidates", "vocab",
                              "--method", "bm25", "--out", str(out)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["search", "--index", str(out), "--json", "-k", "2", "高血压病"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)[0]["results"]
    assert rows[0]["name"] == "高血压" and rows[0]["codes"] == ["I10"]


def test_clear_errors(data_dir, tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["evaluate", "--dataset", "nope"])
    assert res.exit_code == 2 and "unknown dataset" in res.output
    res = runner.invoke(app, ["search", "--index", str(tmp_path), "x"])
    assert res.exit_code == 2 and "not a medrank index" in res.output
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"task": "no-such-task"}))
    res = runner.invoke(app, ["train", str(cfg)])
    assert res.exit_code == 2 and "unknown task" in res.output
    cfg.write_text("{not json")
    res = runner.invoke(app, ["train", str(cfg)])
    assert res.exit_code == 2 and "cannot parse" in res.output
    # an empty procedure mention is refused before any model loads, naming the argument
    res = runner.invoke(app, ["normalize", "--model", str(tmp_path / "no-run"), "右甲状腺叶切除术", "  "])
    assert res.exit_code == 2 and "mention 1 must be a non-empty string" in res.output
