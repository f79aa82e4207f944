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
    # a query in neither English nor Chinese is reported, not searched, unless --language says to
    res = runner.invoke(app, ["search", "--index", str(out), "--json", "hypertension artérielle sévère", "高血压病"])
    assert res.exit_code == 1 and "reads as French" in json.loads(res.output)[0]["error"]
    assert json.loads(res.output)[1]["results"]
    res = runner.invoke(app, ["search", "--index", str(out), "--language", "zh", "hypertension artérielle sévère"])
    assert res.exit_code == 0, res.output


def test_clear_errors(data_dir, tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["evaluate", "--dataset", "nope"])
    assert res.exit_code == 2 and "unknown dataset" in res.output
    res = runner.invoke(app, ["search", "--index", str(tmp_path), "x"])
    assert res.exit_code == 2 and "not a medrank index" in res.output
    res = runner.invoke(app, ["search", "--index", str(tmp_path / "missing"), "x"])
    assert res.exit_code == 2 and "does not exist" in res.output and "manifest" not in res.output
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
    # a mention without a Chinese character is reported, not normalised (no model is loaded for it)
    res = runner.invoke(app, ["normalize", "--model", str(tmp_path / "no-run"), "--json", "laparoscopic cholecystectomy"])
    assert res.exit_code == 1 and "holds no Chinese character" in json.loads(res.output)[0]["error"]


@pytest.mark.parametrize("task, bad, message", [
    ("history-global", {"epochs": "3"}, "history config: epochs must be an integer, got '3'"),
    ("similar", {"train": {"lr": "1e-3"}}, "similar config.train: lr must be a number, got '1e-3' (YAML reads"),
    ("symptom", {"epochs": [1]}, "symptom config: epochs must be an integer"),
    ("procedures-mtcg", {"lr": "fast"}, "procedures config: lr must be a number"),
    ("cdv", {"use_glove": "yes"}, "cdv config: use_glove must be a bool"),
])
def test_train_config_with_a_wrong_type_is_one_line(tmp_path, task, bad, message):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"task": task, **bad}))
    res = CliRunner().invoke(app, ["train", str(cfg), "--out", str(tmp_path / "run")])
    assert res.exit_code == 2 and message in " ".join(res.output.split()), res.output


def test_train_set_replaces_a_config_key_and_the_task_reader_checks_it(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"task": "symptom", "epochs": 1}))
    res = CliRunner().invoke(app, ["train", str(cfg), "--out", str(tmp_path / "run"), "--set", "epochs=[1]"])
    assert res.exit_code == 2 and "symptom config: epochs must be an integer" in " ".join(res.output.split()), res.output
    res = CliRunner().invoke(app, ["train", str(cfg), "--set", "task=cdv"])
    assert res.exit_code == 2 and "cannot change the task" in res.output
    res = CliRunner().invoke(app, ["train", str(cfg), "--set", "epochs"])
    assert res.exit_code == 2 and "KEY=VALUE" in res.output


def test_bad_input_is_one_line_not_a_traceback(data_dir, tmp_path, monkeypatch):
    runner = CliRunner()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("precious")
    res = runner.invoke(app, ["--data", str(data_dir), "index", "--dataset", "chip-cdn", "--candidates", "gold",
                              "--method", "bm25", "--out", str(mine)])
    assert res.exit_code == 2 and "notes.txt" in res.output and (mine / "notes.txt").read_text() == "precious"
    for args, needle in [
        (["--threads", "0", "evaluate"], "--threads must be >= 1"),
        (["search", "--index", str(tmp_path), ""], "query 1 is empty"),
        (["demo", "-k", "0"], "-k must be >= 1"),
        (["demo", "--method", "foo"], "unknown method 'foo'"),
        (["evaluate", "--dataset", "ncbi-disease", "--model", str(tmp_path / "none")], "--model and --set are not used"),
        (["evaluate", "--dataset", "chip-cdn", "--model", str(tmp_path / "none")], "is not a trained symptom run"),
        (["evaluate", "--dataset", "chip-cdn", "--report", str(tmp_path)], "is a folder"),
        (["rerank", "--model", str(tmp_path), "--dialogue", str(tmp_path), "--candidates", str(tmp_path)], "Is a directory"),
        (["rerank", "--model", str(tmp_path), "--dialogue", str(tmp_path), "--candidates", str(tmp_path), "-k", "0"], "-k must be >= 1"),
        (["evaluate", "--dataset", "chip2019-procedures", "--set", "typo_key=1"], "unknown options ['typo_key']"),
    ]:
        res = runner.invoke(app, ["--data", str(data_dir), *args])
        assert res.exit_code == 2 and needle in res.output, (args, res.output)
        assert "Traceback" not in res.output
    monkeypatch.chdir(tmp_path)  # no ./runs here: the default procedure model is missing, said plainly
    res = runner.invoke(app, ["normalize", "右侧甲状腺叶切除术"])
    assert res.exit_code == 2 and "no trained normaliser under ./runs/procedures/fusion" in res.output


def test_run_reports_unexpected_bad_input_in_one_line(monkeypatch, capsys):
    import typer

    from medrank import cli, console

    broken = typer.Typer()

    @broken.command()
    def read(path: str) -> None:
        open(path).read()  # a folder: IsADirectoryError, which no command-level handler expected

    @broken.command()
    def other() -> None:
        pass

    monkeypatch.setattr(cli, "app", broken)
    monkeypatch.setitem(console.STATE, "verbose", False)
    with pytest.raises(SystemExit) as exit_info:
        cli.run(["read", "/"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "error: /: Is a directory" in err and "Traceback" not in err
    monkeypatch.setitem(console.STATE, "verbose", True)  # --verbose keeps the traceback
    with pytest.raises(IsADirectoryError):
        cli.run(["read", "/"])


def test_reports_are_strict_json_in_the_evaluators_scale(tmp_path, monkeypatch):
    from medrank.registry import EVALUATORS

    def fake(test, split, model, options):
        return {"systems": {"sys": {"single": 87.5, "multi": float("nan")}}, "metric_names": ["single", "multi"], "metric_scale": 1}

    monkeypatch.setitem(EVALUATORS, "fake-percent", fake)
    report = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["evaluate", "--dataset", "fake-percent", "--report", str(report)])
    assert res.exit_code == 0, res.output
    assert json.loads(report.read_text(), parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))["systems"]["sys"]["multi"] is None
    assert "| sys | 87.50 | - |" in report.with_suffix(".md").read_text()


def test_evaluate_help_names_every_registered_dataset():
    from medrank.cli import PIPELINE_DATASETS
    from medrank.registry import EVALUATORS

    assert set(PIPELINE_DATASETS) == set(EVALUATORS)
    res = CliRunner().invoke(app, ["evaluate", "--help"], terminal_width=200)
    assert all(d in " ".join(res.output.split()) for d in ("history-ddxplus", "chip2019-procedures", "medquad"))


@pytest.mark.parametrize("task", ["passage-dssm", "passage-cross-encoder", "similar", "history-global"])
def test_train_refuses_a_folder_of_someone_elses_files(tmp_path, task):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"task": task}))
    res = CliRunner().invoke(app, ["train", str(cfg), "--out", str(mine)])
    assert res.exit_code == 2 and "holds no medrank run" in " ".join(res.output.split()), res.output
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_info_reports_kind_config_results_and_refusals(tmp_path):
    from medrank import Concept
    from medrank.retrieval.concept import ConceptRetriever

    ConceptRetriever.build([Concept("C1", "chest pain"), Concept("C2", "fever")], language="en").save(tmp_path / "ret")
    res = CliRunner().invoke(app, ["info", str(tmp_path / "ret"), "--json"])
    assert res.exit_code == 0, res.output
    body = json.loads(res.output)
    assert body["kind"] == "concept-retriever" and body["files"] >= 2 and body["bytes"] > 0

    run = tmp_path / "mtcg"
    (run / "checkpoints" / "epoch-2").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"task": "procedures-mtcg", "epochs": 16, "lr": 5e-5, "other": 1}))
    (run / "results.json").write_text(json.dumps({"val": {"recall": {"recall@10": 97.35}, "note": "x"}, "config": {"a": 1},
                                                  "train_seconds": 1500.0, "history": [1, 2]}))
    body = json.loads(CliRunner().invoke(app, ["info", str(run), "--json"]).output)
    assert body["kind"] is None and "candidate generator only" in body["not_loadable"]
    assert body["config"] == {"task": "procedures-mtcg", "epochs": 16, "lr": 5e-5}  # the highlights only
    assert body["results"] == {"val": {"recall": {"recall@10": 97.35}}, "train_seconds": 1500.0}  # numbers only
    assert body["checkpoints"] == ["epoch-2"]
    table = CliRunner().invoke(app, ["info", str(run)], terminal_width=200).output
    assert "not loadable" in table and "recall.recall@10=97.35" in table and "epoch-2" in table

    # markup-like keys, NaN and a corrupt config are shown, not fatal; --json stays strict JSON
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "config.json").write_text("{not json")
    (odd / "results.json").write_text('{"[/]": 1, "a[red]b": 2.5, "bad": NaN}')
    res = CliRunner().invoke(app, ["info", str(odd)], terminal_width=200)
    assert res.exit_code == 2 and "[/]" in res.output and "a[red]b" in res.output and "unreadable" in res.output
    assert "holds no artefact" in res.output  # a folder medrank cannot open is a failure for scripts
    body = json.loads(CliRunner().invoke(app, ["info", str(odd), "--json"]).output, parse_constant=lambda c: 1 / 0)
    assert body["results"] == {"[/]": 1, "a[red]b": 2.5} and "config.json" in body["errors"][0]

    for bad, message in ((tmp_path / "missing", "does not exist"), (run / "config.json", "is a file")):
        res = CliRunner().invoke(app, ["info", str(bad)])
        assert res.exit_code == 2 and message in res.output


def test_query_without_letters_or_digits_is_refused(data_dir, tmp_path):
    out = tmp_path / "ix"
    runner = CliRunner()
    res = runner.invoke(app, ["--data", str(data_dir), "index", "--dataset", "chip-cdn", "--candidates", "vocab",
                              "--method", "bm25", "--out", str(out)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["search", "--index", str(out), "\U0001f912\U0001f915"])
    assert res.exit_code == 2 and "no letter or digit" in res.output


def test_missing_data_root_names_the_variable_to_set(tmp_path, monkeypatch):
    res = CliRunner().invoke(app, ["--data", str(tmp_path / "nowhere"), "evaluate", "--dataset", "chip-cdn",
                                   "--method", "bm25"])
    assert res.exit_code == 2 and "MEDRANK_DATA" in res.output and "--data" in res.output


def test_default_data_root_falls_back_to_the_checkout(tmp_path, monkeypatch):
    from medrank import config

    monkeypatch.delenv("MEDRANK_DATA", raising=False)
    monkeypatch.chdir(tmp_path)  # ../shared/data does not exist from here
    beside_checkout = (config.Path(config.__file__).resolve().parents[2] / config.DEFAULT_DATA_ROOT).resolve()
    expected = beside_checkout if beside_checkout.is_dir() else (tmp_path / config.DEFAULT_DATA_ROOT).resolve()
    assert config.data_root() == expected
