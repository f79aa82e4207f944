"""The ``medrank`` command line.

Global options (``--data``, ``--threads``, ``--seed``, ``--verbose``) come
before the command. Query text is never logged; it is only printed as the
command's own output.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from medrank import config

app = typer.Typer(
    name="medrank",
    help="Medical retrieval and ranking: index, search and evaluate on real medical data.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
err = Console(stderr=True, soft_wrap=True)
log = logging.getLogger("medrank")

_STATE: dict[str, Any] = {"data": None, "verbose": False}

DataOpt = Annotated[
    str | None, typer.Option("--data", help="Dataset root (default: $MEDRANK_DATA or ../shared/data).")
]


@app.callback()
def main(
    data: DataOpt = None,
    threads: Annotated[int | None, typer.Option(help="CPU threads for torch/faiss/BLAS (default: all cores).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 13,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging (never logs query text).")] = False,
) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    _STATE["verbose"] = verbose
    if threads is not None and threads < 1:
        _fail(f"--threads must be >= 1, got {threads}")
    if data is not None:
        _STATE["data"] = data
        os.environ["MEDRANK_DATA"] = str(Path(data).resolve())
    config.set_threads(threads)
    config.seed_everything(seed)


def _print_error(message: str | BaseException) -> None:
    """``error: message`` (an exception: its message) on stderr."""
    if isinstance(message, BaseException):
        message = _error_message(message)
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)


def _fail(message: str | BaseException) -> None:
    """Print ``error: message`` and exit with code 2."""
    _print_error(message)
    raise typer.Exit(code=2)


def _error_message(exc: BaseException) -> str:
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
    import io

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


def run(argv: list[str] | None = None) -> None:
    """The ``medrank`` entry point: the Typer app, with bad input reported as one line.

    Commands report the errors they expect themselves; anything else that is a bad value or a
    bad path (``ValueError``, ``OSError``: a folder given for a file, an unknown model name, a
    report path that cannot be written) ends as ``error: ...`` with exit code 2 instead of a
    traceback. ``--verbose`` keeps the traceback.
    """
    try:
        app(args=argv, prog_name="medrank")
    except (ValueError, OSError) as exc:
        if _STATE.get("verbose"):
            raise
        _print_error(exc)
        err.print("(run with --verbose for the traceback)", style="dim")
        sys.exit(2)


def _json_safe(obj: Any) -> Any:
    """NaN / inf floats as null (strict JSON), recursively."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    return obj


def _check_report(report: Path | None) -> None:
    """Fail before any work when the report cannot be written."""
    if report is None:
        return
    if report.is_dir():
        _fail(f"--report {report} is a folder; give a file path such as {report / 'report.json'}")
    try:
        report.parent.mkdir(parents=True, exist_ok=True)  # the folder the user asked for, created before the work
    except OSError as exc:
        _fail(f"--report {report}: cannot create its folder ({_error_message(exc)})")
    if not os.access(report.parent, os.W_OK | os.X_OK):
        _fail(f"--report {report}: its folder is not writable")


def _build_retriever(
    dataset: str, candidates: str, method: str, encoder_name: str | None, eval_set: Any = None
) -> Any:
    from medrank.encoders import load_encoder
    from medrank.retrieval.concept import ConceptRetriever
    from medrank.retrieval.concept_data import default_encoder, default_language, load_candidates

    concepts = load_candidates(dataset, candidates, eval_set=eval_set, root=_STATE["data"])
    encoder = None
    if method in ("dense", "hybrid"):
        from medrank.encoders import CachedEncoder
        from medrank.encoders.registry import ALIASES

        name = encoder_name or default_encoder(dataset)
        encoder = load_encoder(name)
        if name.lower() in ALIASES:
            # packaged weights never change: reuse vocabulary vectors across runs ($MEDRANK_CACHE/embeddings)
            encoder = CachedEncoder(encoder, config.cache_dir() / "embeddings")
    retriever = ConceptRetriever.build(concepts, method=method, encoder=encoder, language=default_language(dataset))
    _uncache_queries(retriever.index)
    return retriever


def _uncache_queries(index: Any) -> None:
    """Queries must not go through the on-disk cache (it would persist hashes of patient text)."""
    from medrank.encoders import CachedEncoder

    for part in getattr(index, "components", [index]):
        if isinstance(getattr(part, "encoder", None), CachedEncoder):
            part.encoder = part.encoder.encoder


@app.command()
def index(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write the index to (atomic).")],
    dataset: Annotated[str, typer.Option(help="chip-cdn | ncbi-disease | bc5cdr (concept vocabularies)")] = "chip-cdn",
    candidates: Annotated[str, typer.Option(help="'gold', 'vocab' or a vocabulary file.")] = "vocab",
    method: Annotated[str, typer.Option(help="bm25 | dense | hybrid")] = "hybrid",
    encoder: Annotated[str | None, typer.Option(help="minilm | e5-small | a model folder / HF id.")] = None,
) -> None:
    """Build a concept index over a vocabulary and save it."""
    try:
        t0 = time.perf_counter()
        retriever = _build_retriever(dataset, candidates, method, encoder)
        retriever.save(out)
    except (ValueError, OSError) as exc:
        _fail(exc)
    console.print(
        f"indexed {len(retriever.concepts):,} concepts ({len(retriever.index):,} entries, {method}) "
        f"in {time.perf_counter() - t0:.1f}s → {out}", markup=False
    )


@app.command()
def search(
    queries: Annotated[list[str], typer.Argument(help="One or more query strings.")],
    index_dir: Annotated[Path, typer.Option("--index", "-i", help="An index written by `medrank index`.")],
    k: Annotated[int, typer.Option("-k", help="How many concepts to return.")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Search a saved concept index."""
    from medrank.index import IndexFormatError
    from medrank.retrieval.concept import ConceptRetriever

    if k < 1:
        _fail("-k must be >= 1")
    _check_queries(queries)
    try:
        retriever = ConceptRetriever.load(index_dir)
    except (IndexFormatError, OSError) as exc:
        _fail(exc)
    rankings = retriever.search(queries, k=k)
    results = [{"query": q, "results": retriever.describe(r)} for q, r in zip(queries, rankings, strict=True)]
    if as_json:
        console.print_json(json.dumps(results, ensure_ascii=False))
        return
    for res in results:
        _print_results(res["query"], res["results"])


def _check_queries(queries: list[str]) -> None:
    for i, q in enumerate(queries, 1):
        if not q.strip():
            _fail(f"query {i} is empty")


def _print_results(query: str, rows: list[dict[str, Any]]) -> None:
    table = Table(title=escape(query), title_justify="left")  # the query is text, not markup
    table.add_column("#", justify="right")
    table.add_column("concept")
    table.add_column("id / codes")
    table.add_column("score", justify="right")
    for rank, row in enumerate(rows, 1):
        ident = ", ".join(row.get("codes", [])[:3]) or row["id"]
        table.add_row(str(rank), escape(row["name"]), escape(ident), f"{row['score']:.4f}")  # names are text, not markup
    console.print(table)


#: the datasets whose evaluators the pipelines register (tests/test_cli.py checks this list against the registry)
PIPELINE_DATASETS = ("medquad", "chip-sts", "kuake-qqr", "medical-question-pairs", "rqe", "chip2019-procedures",
                     "history-mts-aci", "history-ddxplus")


@app.command()
def evaluate(
    dataset: Annotated[str, typer.Option(help="Concept retrieval: chip-cdn | ncbi-disease | bc5cdr; a pipeline's task: "
                                              + " | ".join(PIPELINE_DATASETS) + ".")] = "chip-cdn",
    split: Annotated[str | None, typer.Option(help="chip-cdn: valid|train|all; ncbi-disease: devel|train; "
                                                   "a pipeline dataset: its visible validation split by default.")] = None,
    test: Annotated[Path | None, typer.Option("--test", help="Any file in the dataset's visible format.")] = None,
    candidates: Annotated[str, typer.Option(help="'gold', 'vocab' or a vocabulary file.")] = "gold",
    method: Annotated[list[str], typer.Option(help="bm25 | dense | hybrid (repeatable).")] = ["bm25"],  # noqa: B006
    encoder: Annotated[list[str], typer.Option(help="Encoders for dense/hybrid (repeatable).")] = [],  # noqa: B006
    index_dir: Annotated[Path | None, typer.Option("--index", help="Evaluate a saved index instead.")] = None,
    model: Annotated[Path | None, typer.Option(help="A trained model / run directory to evaluate.")] = None,
    option: Annotated[list[str], typer.Option("--set", help="Task option KEY=VALUE (repeatable).")] = [],  # noqa: B006
    report: Annotated[Path | None, typer.Option(help="JSON report path; a .md table is written beside it.")] = None,
) -> None:
    """Score a dataset's task on a split or on any file in the dataset's visible format.

    Concept datasets (chip-cdn, ncbi-disease, bc5cdr) score retrieval; other
    datasets dispatch to the evaluator their pipeline registers.
    """
    from medrank.metrics import to_markdown_table
    from medrank.retrieval.concept import DEFAULT_METRICS, ConceptRetriever, evaluate_retriever
    from medrank.retrieval.concept_data import DATASETS, default_encoder, load_eval_set
    from medrank.utils.io import atomic_write_json, atomic_write_text

    _check_report(report)
    if dataset not in DATASETS:
        _evaluate_task(dataset, test, split, model, _parse_options(option), report)
        return
    if model is not None or option:
        _fail(f"--model and --set are not used for {dataset} (concept retrieval); evaluate a saved index with --index")

    try:
        eval_set = load_eval_set(dataset, split, test, root=_STATE["data"])
    except (ValueError, OSError) as exc:
        _fail(exc)
    systems: dict[str, Any] = {}
    if index_dir is not None:
        systems[f"index:{index_dir.name}"] = lambda: ConceptRetriever.load(index_dir)
    else:
        for m in method:
            encs = [None] if m == "bm25" else (encoder or [default_encoder(dataset)])
            for e in encs:
                name = m if e is None else f"{m}:{e}"
                systems[name] = lambda m=m, e=e: _build_retriever(dataset, candidates, m, e, eval_set)
    results: dict[str, Any] = {}
    for name, make in systems.items():
        try:
            retriever = make()
        except (ValueError, OSError) as exc:
            _fail(exc)
        results[name] = evaluate_retriever(retriever, eval_set, DEFAULT_METRICS)
        console.print(f"[bold]{escape(name)}[/]: " + "  ".join(f"{k}={v:.4f}" for k, v in results[name]["metrics"].items()))
    payload = {
        "dataset": dataset,
        "split": split,
        "test_file": str(test) if test else None,
        "candidates": candidates,
        "n_queries": len(eval_set.queries),
        "unmapped_gold_labels": eval_set.unmapped,
        "systems": results,
    }
    if report is not None:
        atomic_write_json(report, _json_safe(payload))
        table = to_markdown_table({n: r["metrics"] for n, r in results.items()}, list(DEFAULT_METRICS))
        atomic_write_text(report.with_suffix(".md"), table + "\n")
        console.print(f"report → {report} and {report.with_suffix('.md')}", markup=False)


def _parse_options(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            _fail(f"--set expects KEY=VALUE, got {pair!r}")
        key, value = pair.split("=", 1)
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def _evaluate_task(
    dataset: str, test: Path | None, split: str | None, model: Path | None, options: dict[str, Any], report: Path | None
) -> None:
    from medrank.metrics import to_markdown_table
    from medrank.registry import EVALUATORS
    from medrank.utils.io import atomic_write_json, atomic_write_text

    if dataset not in EVALUATORS:
        from medrank.retrieval.concept_data import DATASETS

        _fail(f"unknown dataset {dataset!r}; known: {sorted([*DATASETS, *EVALUATORS])}")
    try:
        payload = EVALUATORS[dataset](test, split, model, options)
    except (ValueError, OSError) as exc:
        _fail(exc)
    systems = payload.get("systems", {})
    metric_names = payload.get("metric_names") or sorted({m for r in systems.values() for m in r})
    for name, metrics in systems.items():
        console.print(f"[bold]{escape(name)}[/]: " + "  ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
    if report is not None:
        atomic_write_json(report, _json_safe(payload))
        # an evaluator whose values are already percentages says so with metric_scale = 1
        table = to_markdown_table(systems, metric_names, scale=payload.get("metric_scale", 100))
        atomic_write_text(report.with_suffix(".md"), table + "\n")
        console.print(f"report → {report} and {report.with_suffix('.md')}", markup=False)


@app.command()
def train(
    config_path: Annotated[Path, typer.Argument(help="JSON or YAML config with a 'task' key.", metavar="CONFIG")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Run directory (default: from the config).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue after the last complete checkpoint.")] = True,
) -> None:
    """Train a model from a config file; checkpoints every epoch and resumes after interruption."""
    from medrank.registry import TRAINERS, read_config

    try:
        cfg = read_config(config_path)
    except (ValueError, OSError) as exc:
        _fail(exc)
    task = cfg["task"]
    if task not in TRAINERS:
        _fail(f"unknown task {task!r} in {config_path}; known tasks: {sorted(TRAINERS)}")
    output_dir = out or Path(cfg.get("output_dir", Path("runs") / f"{task}-{config_path.stem}"))
    try:
        summary = TRAINERS[task](cfg, output_dir, resume)
    except FloatingPointError as exc:
        _fail(f"{exc}: the training diverged; try a lower lr, then --no-resume")
    except (ValueError, OSError) as exc:
        _fail(exc)
    console.print_json(json.dumps(summary, ensure_ascii=False, default=str))


#: the summary file each pipeline writes into its run folder, in the order :func:`info` looks for them
RESULT_FILES = ("results.json", "summary.json", "eval_valid.json")
#: config keys worth one line each in ``medrank info``
INFO_CONFIG_KEYS = ("task", "name", "encoder", "base", "loss", "epochs", "lr", "seed", "threads")


def run_summary(path: Path) -> dict[str, Any]:
    """What ``medrank info`` reports about an artefact folder: kind, config highlights, results, size."""
    from medrank.loading import artefact_kind

    out: dict[str, Any] = {"path": str(path)}
    try:
        out["kind"] = artefact_kind(path)
    except ValueError as exc:  # a folder medrank cannot load still has a config and files to show
        out["kind"], out["not_loadable"] = None, str(exc)
    cfg_path = path / "config.json"
    if cfg_path.is_file():
        cfg = _read_json(cfg_path, out)
        if isinstance(cfg, dict):
            out["config"] = {k: cfg[k] for k in INFO_CONFIG_KEYS if k in cfg}
    for name in RESULT_FILES:
        if (path / name).is_file():
            out["results_file"] = name
            out["results"] = _numbers(_read_json(path / name, out))
            break
    checkpoints = path / "checkpoints"
    if checkpoints.is_dir():
        out["checkpoints"] = sorted(p.name for p in checkpoints.iterdir() if p.is_dir())
    files = [f for f in path.rglob("*") if f.is_file()]
    out["files"], out["bytes"] = len(files), sum(f.stat().st_size for f in files)
    return out


def _read_json(path: Path, out: dict[str, Any]) -> Any:
    """A JSON file's value, or ``None`` with the reason under ``out["errors"]`` (the rest is still reported)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        out.setdefault("errors", []).append(f"{path}: {_error_message(exc)}")
        return None


def _numbers(value: Any, depth: int = 0) -> Any:
    """The numeric leaves of a results file, three levels deep (configs, lists, text and NaN left out)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None  # strict JSON has no NaN / Infinity
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, dict) and depth < 3:
        kept = {k: _numbers(v, depth + 1) for k, v in value.items() if k != "config"}
        kept = {k: v for k, v in kept.items() if v not in (None, {})}
        return kept or None
    return None


def _flat(value: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in value.items():
        out.extend(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else [(f"{prefix}{k}", v)])
    return out


def _short(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


@app.command()
def info(
    path: Annotated[Path, typer.Argument(help="A run, model or index folder written by medrank.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """What a saved folder holds: its kind (as medrank.load sees it), config, results and size."""
    if not path.exists():
        _fail(f"{path} does not exist")
    if not path.is_dir():
        _fail(f"{path} is a file; medrank artefacts are folders")
    try:
        summary = run_summary(path)
    except OSError as exc:  # e.g. an unreadable folder
        _fail(exc)
    if as_json:
        console.print_json(json.dumps(summary, ensure_ascii=False))
        return
    console.print(escape(str(path)), soft_wrap=True, highlight=False)
    table = Table(show_header=False)
    table.add_column("field")
    table.add_column("value")
    table.add_row("kind", escape(summary["kind"] or f"not loadable: {summary['not_loadable']}"))
    for key, value in summary.get("config", {}).items():
        table.add_row(escape(f"config.{key}"), escape(str(value)))
    results = summary.get("results") or {}
    for key, value in results.items():
        shown = ", ".join(f"{k}={_short(v)}" for k, v in _flat(value)) if isinstance(value, dict) else _short(value)
        table.add_row(escape(f"{summary['results_file']}: {key}"), escape(shown))
    if "checkpoints" in summary:
        table.add_row("checkpoints", escape(", ".join(summary["checkpoints"]) or "none"))
    table.add_row("size", f"{summary['files']} files, {summary['bytes'] / 1e6:.1f} MB")
    for error in summary.get("errors", []):
        table.add_row("unreadable", escape(error))
    console.print(table)


EXAMPLES_ZH = ["左膝退变伴游离体", "糖尿病反复低血糖", "头痛头晕", "陈旧型心梗", "右乳腺癌IV期"]


@app.command()
def demo(
    queries: Annotated[list[str] | None, typer.Argument(help="Queries (default: five real CHIP-CDN style examples).")] = None,
    method: Annotated[str, typer.Option(help="bm25 | dense | hybrid")] = "hybrid",
    rebuild: Annotated[bool, typer.Option(help="Rebuild the cached index.")] = False,
    k: Annotated[int, typer.Option("-k")] = 5,
) -> None:
    """Main job: index the 40k-row ICD-10 Beijing vocabulary (CHIP-CDN) and answer example queries.

    The index is built once with the offline e5-small encoder and cached under
    ``$MEDRANK_CACHE`` (default ``~/.cache/medrank``); later runs start in seconds.
    """
    from medrank.retrieval.concept import ConceptRetriever

    if method not in ("bm25", "dense", "hybrid"):
        _fail(f"unknown method {method!r}; available: bm25, dense, hybrid")
    if k < 1:
        _fail("-k must be >= 1")
    if queries:
        _check_queries(queries)
    target = config.cache_dir() / "indexes" / f"chip-cdn-vocab-{method}"
    t0 = time.perf_counter()
    if rebuild or not (target / "index" / "manifest.json").exists():
        console.print(f"building the {method} index over the ICD-10 Beijing vocabulary (first run only)…", markup=False)
        try:
            retriever = _build_retriever("chip-cdn", "vocab", method, None)
        except (ValueError, OSError) as exc:
            _fail(exc)
        retriever.save(target)
    else:
        retriever = ConceptRetriever.load(target)
    console.print(f"{len(retriever.concepts):,} concepts ready in {time.perf_counter() - t0:.1f}s ({target})", markup=False)
    qs = queries or EXAMPLES_ZH
    for q, ranking in zip(qs, retriever.search(qs, k=k), strict=True):
        _print_results(q, retriever.describe(ranking))


cache_app = typer.Typer(help="The procedure pipeline's frozen-bottom cache: list and prune.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


@cache_app.command("list")
def cache_list() -> None:
    """Entries of $MEDRANK_CACHE/procedures-frozen, least recently used first."""
    from rich.table import Table

    from medrank.cache_admin import default_root, list_entries

    entries = list_entries()
    table = Table("entry", "size", "days unused")
    for e in entries:
        table.add_row(escape(e.path.name), f"{e.bytes / 2**20:,.0f} MiB", f"{e.days_unused:.1f}")
    console.print(table)
    console.print(f"{default_root()}: {len(entries)} entries, {sum(e.bytes for e in entries) / 2**20:,.0f} MiB", markup=False)


@cache_app.command("prune")
def cache_prune(
    unused_days: Annotated[float, typer.Option(help="Remove entries no run has read for this many days.")] = 30.0,
    yes: Annotated[bool, typer.Option("--yes", help="Remove them (without it: only list what would go).")] = False,
) -> None:
    """Remove cache entries no run has read for a while (a removed entry is recomputed when next needed)."""
    from medrank.cache_admin import prune

    try:
        done, failed = prune(unused_days, dry_run=not yes)
    except ValueError as exc:  # a negative or non-finite --unused-days
        _fail(exc)
    for e in done:
        console.print(f"{'removed' if yes else 'would remove'} {e.path} ({e.bytes / 2**20:,.0f} MiB, {e.days_unused:.1f} days unused)", markup=False)
    total = sum(e.bytes for e in done) / 2**20
    console.print(f"{len(done)} entries, {total:,.0f} MiB{'' if yes else ' (dry run: add --yes to remove)'}", markup=False)
    if failed:
        _fail(f"could not remove {len(failed)} entries: {', '.join(str(e.path) for e in failed)}")


def _register_plugins() -> None:
    from medrank.registry import load_plugins

    for module in load_plugins():
        if hasattr(module, "register"):
            module.register(app)


_register_plugins()


if __name__ == "__main__":  # pragma: no cover
    app()
