"""Bad input ends as one ``error:`` line (exit code 2), never a traceback; user text is never markup."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from medrank.cli import app


def _one_line_error(res) -> str:
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    assert "error:" in res.output
    return res.output


@pytest.mark.parametrize("args", [
    ["similar", "headache", "--corpus", "{tmp}/missing.txt"],
    ["similar", "headache", "--corpus", "{tmp}/latin1.txt"],
    ["similar", "headache", "--index", "{tmp}/no-index"],
])
def test_similar_reports_its_errors(tmp_path, args):
    (tmp_path / "latin1.txt").write_bytes("fi\xe8vre\n".encode("latin-1"))
    out = _one_line_error(CliRunner().invoke(app, [a.format(tmp=tmp_path) for a in args]))
    assert str(tmp_path) in out.replace("\n", "")  # the message names the file


def test_make_pairs_reports_its_errors(tmp_path):
    _one_line_error(CliRunner().invoke(app, ["make-pairs", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "p.jsonl")]))


def test_query_text_is_printed_as_text_not_markup(capsys):
    from medrank.console import print_results

    print_results("chest pain [/] and [red]fever[/red]", [])  # rich would raise MarkupError on "[/]"
    assert "[red]fever[/red]" in capsys.readouterr().out


def test_decode_errors_name_the_file(tmp_path):
    from medrank.console import error_message

    path = tmp_path / "gbk.tsv"
    path.write_bytes("原始词\t标准词\n".encode("gb18030"))
    with pytest.raises(UnicodeDecodeError) as info, open(path, encoding="utf-8") as fh:
        fh.read()
    message = error_message(info.value)
    assert message.startswith(f"{path}: not UTF-8 text") and "iconv" in message


def test_decode_errors_name_the_file_read_not_an_output_file_open_around_it(tmp_path):
    from medrank.console import error_message

    bad = tmp_path / "latin1.txt"
    bad.write_bytes("fi\xe8vre\n".encode("latin-1"))

    def read(path):
        with open(path, encoding="utf-8") as fh:
            return fh.read()

    def convert(src, dst):
        with open(dst, "w", encoding="utf-8") as out:
            out.write(read(src))

    with pytest.raises(UnicodeDecodeError) as info:
        convert(bad, tmp_path / "out.txt")
    assert error_message(info.value).startswith(f"{bad}: not UTF-8 text (it holds the byte 0xe8)")

    def decode_into(dst):  # bytes decoded while only an output file is open: no file to name
        with open(dst, "w", encoding="utf-8") as out:
            out.write(b"fi\xe8vre".decode("utf-8"))

    with pytest.raises(UnicodeDecodeError) as info:
        decode_into(tmp_path / "out2.txt")
    assert error_message(info.value).startswith("a file: not UTF-8 text")


def test_history_files_need_one_object_per_line(tmp_path):
    from medrank.pipelines.history.data import read_samples

    path = tmp_path / "valid.jsonl"
    path.write_text(json.dumps({"id": "a", "context": []}) + "\n" + json.dumps(["not", "an", "object"]) + "\n")
    with pytest.raises(ValueError, match=r"valid.jsonl:2: expected one JSON object per line, got a list"):
        read_samples(path)


def test_ddxplus_features_that_are_no_list_literal(tmp_path):
    from medrank.pipelines.history.builders.ddxplus import read_patients

    path = tmp_path / "patients.csv"
    header = "age,top5_diagnoses,sex,diagnosis,features,feature_id\n"
    path.write_text(header + "8,[],M,URTI,\"['E_91']\",E_91\n" + "9,[],F,URTI,\"[1,\",E_91\n")
    with pytest.raises(ValueError, match=r"patients.csv: line 3: features is not a Python list literal"):
        read_patients(path)
    path.write_text(header + "9,[],F,URTI,\"{'E_91': 1}\",E_91\n")
    with pytest.raises(ValueError, match=r"line 2: features is not a list"):
        read_patients(path)


@pytest.mark.parametrize(("value", "message"), [("abc", "must be an integer, got 'abc'"), ("1.5", "must be an integer, got 1.5")])
def test_history_evaluate_checks_option_types(tmp_path, value, message):
    path = tmp_path / "valid.jsonl"
    path.write_text(json.dumps({"id": "a", "context": [], "positives": ["q1"], "candidates": ["q1", "q2"]}) + "\n")
    res = CliRunner().invoke(app, ["evaluate", "--dataset", "history-mts-aci", "--test", str(path),
                                   "--set", f"max_samples={value}"])
    assert message in _one_line_error(res)


def test_a_failed_history_build_leaves_the_previous_folder(tmp_path, monkeypatch):
    import medrank.pipelines.history.builders.ddxplus as ddx
    from tests.test_history_data import _ddx_fixture

    patients = _ddx_fixture(tmp_path)
    out = tmp_path / "built"
    ddx.build_ddxplus(out, {"train": [patients]}, valid_fraction=0.34, seed=0, k=30)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    real, calls = ddx.write_jsonl, []

    def fail_on_third(path, rows):  # bank and train.jsonl (another carve: other content) are written first
        calls.append(path)
        if len(calls) == 3:
            raise OSError("disk full")
        return real(path, rows)

    monkeypatch.setattr(ddx, "write_jsonl", fail_on_third)
    with pytest.raises(OSError, match="disk full"):
        ddx.build_ddxplus(out, {"train": [patients]}, valid_fraction=0.34, seed=1, k=30)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the new bank was never swapped in
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".built")] == []  # no temporary folder left


def test_an_independent_split_is_not_written_over_its_bank_folder(tmp_path):
    from medrank.pipelines.history.builders import build_mts_aci

    (tmp_path / "built").mkdir()
    with pytest.raises(ValueError, match="is the --bank folder itself"):
        build_mts_aci(tmp_path / "built" / ".." / "built", {"test": [tmp_path / "x.csv"]}, bank_dir=tmp_path / "built")
