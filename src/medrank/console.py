"""What every ``medrank`` command shares: the global options' state, printing, and the error exit.

The app (:mod:`medrank.cli`) and the pipelines' command modules (``pipelines/*/cli.py``) use it;
it imports neither. Query text is printed as a command's own output and never logged.
"""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console()
err = Console(stderr=True, soft_wrap=True)

#: the global options (``--data``, ``--verbose``) as the app's callback set them
STATE: dict[str, Any] = {"data": None, "verbose": False}


def print_error(message: str | BaseException) -> None:
    """``error: message`` (an exception: its message) on stderr."""
    if isinstance(message, BaseException):
        message = error_message(message)
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)


def fail(message: str | BaseException) -> None:
    """Print ``error: message`` and exit with code 2."""
    print_error(message)
    raise typer.Exit(code=2)


def error_message(exc: BaseException) -> str:
    """One line a user understands for an expected error (a bad path, a file that is not UTF-8 …)."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    if isinstance(exc, UnicodeDecodeError):
        where = _file_being_read(exc)
        byte = exc.object[exc.start:exc.start + 1].hex()
        return (f"{where or 'a file'}: not UTF-8 text (it holds the byte 0x{byte}); medrank reads UTF-8 files: "
                "convert it first (iconv -f <its encoding> -t UTF-8, e.g. GB18030 for Chinese)")
    return str(exc) or type(exc).__name__


def _file_being_read(exc: BaseException) -> str | None:
    """The file a decode error came from: a text file opened for reading, held by the innermost frame of
    ``exc``'s traceback that holds one (the reader's frame, not an output file open further out). By the
    time the error is reported the reader's ``with`` block has closed it, so closed files count."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):  # innermost first
        for value in frame.f_locals.values():
            if (isinstance(value, io.TextIOWrapper) and "r" in value.mode
                    and isinstance(getattr(value, "name", None), str)):
                return value.name
    return None


def json_safe(obj: Any) -> Any:
    """NaN / inf floats as null (strict JSON), recursively."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj


def check_report(report: Path | None) -> None:
    """Fail before any work when the report cannot be written."""
    if report is None:
        return
    if report.is_dir():
        fail(f"--report {report} is a folder; give a file path such as {report / 'report.json'}")
    try:
        report.parent.mkdir(parents=True, exist_ok=True)  # the folder the user asked for, created before the work
    except OSError as exc:
        fail(f"--report {report}: cannot create its folder ({error_message(exc)})")
    if not os.access(report.parent, os.W_OK | os.X_OK):
        fail(f"--report {report}: its folder is not writable")


def check_queries(queries: list[str]) -> None:
    """Fail on an empty query or one with no letter or digit, e.g. emoji only (numbered from 1)."""
    for i, q in enumerate(queries, 1):
        if not q.strip():
            fail(f"query {i} is empty")
        if not any(ch.isalnum() for ch in q):
            fail(f"query {i} has no letter or digit to search for")


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs as a dict (values parsed as JSON when they are JSON)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            fail(f"--set expects KEY=VALUE, got {pair!r}")
        key, value = pair.split("=", 1)
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def print_results(query: str, rows: list[dict[str, Any]]) -> None:
    """One query's ranked concepts as a table (query and names printed as text, not markup)."""
    table = Table(title=escape(query), title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("concept")
    table.add_column("id / codes")
    table.add_column("score", justify="right")
    for rank, row in enumerate(rows, 1):
        ident = ", ".join(row.get("codes", [])[:3]) or row["id"]
        table.add_row(str(rank), escape(row["name"]), escape(ident), f"{row['score']:.4f}")
    console.print(table)


def print_refusal(text: str, why: str) -> None:
    """A query the command did not answer, and why (both printed as text, not markup)."""
    console.print(f"[bold]{escape(text)}[/bold]\n  [yellow]{escape(why)}[/yellow]", soft_wrap=True)


def print_ranked(results: list[dict[str, Any]], as_json: bool) -> None:
    """Each query's ranked concepts (``{"query", "results"}``) or why it was not answered (``{"query", "error"}``),
    as JSON or as tables; the exit status is 1 when a query was not answered."""
    if as_json:
        console.print_json(json.dumps(results, ensure_ascii=False))
    else:
        for res in results:
            if "error" in res:
                print_refusal(res["query"], res["error"])
            else:
                print_results(res["query"], res["results"])
    if any("error" in res for res in results):
        raise typer.Exit(1)


def print_metrics(name: str, metrics: dict[str, float]) -> None:
    """``name: metric=value …`` on one line."""
    console.print(f"[bold]{escape(name)}[/]: " + "  ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
