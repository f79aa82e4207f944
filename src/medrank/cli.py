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
from rich.markup import escape
from rich.table import Table

from medrank import config
from medrank.console import (
    STATE,
    check_queries,
    check_report,
    console,
    err,
    error_message,
    fail,
    json_safe,
    parse_options,
    print_error,
    print_metrics,
    print_ranked,
    print_results,
)
from medrank.registry import EVALUATORS, load_plugins

app = typer.Typer(
    name="medrank",
    help="Medical retrieval and ranking: index, search and evaluate on real medical data.",
    no_args_is_help=True,
    add_completion=False,
)
log = logging.getLogger("medrank")

# the pipelines' command modules register their trainers and evaluators on import; their commands are
# added at the end, once the app's own are defined
_PLUGINS = load_plugins()

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
    STATE["verbose"] = verbose
    if threads is not None and threads < 1:
        fail(f"--threads must be >= 1, got {threads}")
    if data is not None:
        STATE["data"] = data
        os.environ["MEDRANK_DATA"] = str(Path(data).resolve())
    config.set_threads(threads)
    config.seed_everything(seed)


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
        if STATE.get("verbose"):
            raise
        print_error(exc)
        err.print("(run with --verbose for the traceback)", style="dim")
        sys.exit(2)


@app.command()
def index(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write the index to (atomic).")],
    dataset: Annotated[str, typer.Option(help="chip-cdn | ncbi-disease | bc5cdr (concept vocabularies)")] = "chip-cdn",
    candidates: Annotated[str, typer.Option(help="'gold', 'vocab' or a vocabulary file.")] = "vocab",
    method: Annotated[str, typer.Option(help="bm25 | dense | hybrid")] = "hybrid",
    encoder: Annotated[str | None, typer.Option(help="minilm | e5-small | a model folder / HF id.")] = None,
    backend: Annotated[str, typer.Option(help="How encoders run: torch | torch-bf16 (bf16 autocast, for AMX CPUs) | onnx | onnx-int8 (ONNX Runtime).")] = "torch",
) -> None:
    """Build a concept index over a vocabulary and save it."""
    from medrank.retrieval.build import build_retriever

    try:
        t0 = time.perf_counter()
        retriever = build_retriever(dataset, candidates, method, encoder, data_root=STATE["data"], backend=backend)
        retriever.save(out)
    except (ValueError, OSError) as exc:
        fail(exc)
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
    language: Annotated[str, typer.Option(help="auto: a query in neither English nor Chinese is reported, not searched "
                                               "(exit status 1); en or zh: search every query.")] = "auto",
) -> None:
    """Search a saved concept index."""
    from medrank.index import IndexFormatError
    from medrank.retrieval.concept import ConceptRetriever
    from medrank.text import language_refusal

    if k < 1:
        fail("-k must be >= 1")
    if language not in ("auto", "en", "zh"):
        fail(f"--language must be auto, en or zh, got {language!r}")
    check_queries(queries)
    if not index_dir.exists():
        fail(f"{index_dir} does not exist; build an index with `medrank index --out DIR`")
    try:
        retriever = ConceptRetriever.load(index_dir)
    except (IndexFormatError, OSError) as exc:
        fail(exc)
    refused = {} if language != "auto" else {
        q: f"not searched: {why} (pass --language en or zh to search anyway)"
        for q in queries if (why := language_refusal(q)) is not None
    }
    kept = [q for q in queries if q not in refused]
    found = dict(zip(kept, retriever.search(kept, k=k), strict=True)) if kept else {}
    results = [{"query": q, "error": refused[q]} if q in refused else {"query": q, "results": retriever.describe(found[q])}
               for q in queries]
    print_ranked(results, as_json)


#: the datasets whose evaluators the pipelines register
PIPELINE_DATASETS = tuple(EVALUATORS)


@app.command()
def evaluate(
    dataset: Annotated[str, typer.Option(help="Concept retrieval: chip-cdn | ncbi-disease | bc5cdr | bc5cdr-disease | bc5cdr-chemical; "
                                              "a pipeline's task: "
                                              + " | ".join(PIPELINE_DATASETS) + ".")] = "chip-cdn",
    split: Annotated[str | None, typer.Option(help="chip-cdn: valid|train|all; ncbi-disease: devel|train; bc5cdr-disease|-chemical: "
                                                   "test|train (the held-out documents of the carve-out, or the rest); "
                                                   "a pipeline dataset: its visible validation split by default.")] = None,
    test: Annotated[Path | None, typer.Option("--test", help="Any file in the dataset's visible format.")] = None,
    candidates: Annotated[str, typer.Option(help="'gold', 'vocab' or a vocabulary file.")] = "gold",
    method: Annotated[list[str], typer.Option(help="bm25 | dense | hybrid (repeatable).")] = ["bm25"],  # noqa: B006
    encoder: Annotated[list[str], typer.Option(help="Encoders for dense/hybrid (repeatable).")] = [],  # noqa: B006
    index_dir: Annotated[Path | None, typer.Option("--index", help="Evaluate a saved index instead.")] = None,
    model: Annotated[Path | None, typer.Option(help="A trained model / run directory to evaluate.")] = None,
    option: Annotated[list[str], typer.Option("--set", help="Task option KEY=VALUE (repeatable).")] = [],  # noqa: B006
    report: Annotated[Path | None, typer.Option(help="JSON report path; a .md table is written beside it.")] = None,
    backend: Annotated[str, typer.Option(help="How encoders run: torch | torch-bf16 | onnx | onnx-int8 (ONNX Runtime); with --index "
                                              "also auto (the fastest ONNX form that agrees with torch).")] = "torch",
    search: Annotated[str, typer.Option(help="With --index: exact | hnsw (an HNSW graph over the saved dense vectors, "
                                             "built at load).")] = "exact",
) -> None:
    """Score a dataset's task on a split or on any file in the dataset's visible format.

    Concept datasets (chip-cdn, ncbi-disease, bc5cdr) score retrieval; other
    datasets dispatch to the evaluator their pipeline registers.
    """
    from medrank.metrics import to_markdown_table
    from medrank.retrieval.build import concept_systems, evaluate_systems
    from medrank.retrieval.concept import DEFAULT_METRICS
    from medrank.retrieval.concept_data import DATASETS, load_eval_set
    from medrank.utils.io import atomic_write_json, atomic_write_text

    check_report(report)
    if dataset not in DATASETS:
        options = parse_options(option)
        if backend != "torch":  # a pipeline that runs encoders itself takes it as its task option (others say they do not)
            options.setdefault("backend", backend)
        _evaluate_task(dataset, test, split, model, options, report)
        return
    if dataset == "chip-cdn" and model is not None and "chip-cdn-sets" in EVALUATORS:
        # a trained symptom run decides sets: CBLUE set P/R/F1 next to NDCG@5 (zero-shot: --dataset chip-cdn-sets)
        _evaluate_task("chip-cdn-sets", test, split, model, {"candidates": candidates, **parse_options(option)}, report)
        return
    if model is not None or option:
        fail(f"--model and --set are not used for {dataset} (concept retrieval); evaluate a saved index with --index")

    try:
        eval_set = load_eval_set(dataset, split, test, root=STATE["data"])
        systems = concept_systems(dataset, candidates, method, encoder, eval_set, index_dir, data_root=STATE["data"],
                                  backend=backend, search=search)
        results = evaluate_systems(systems, eval_set, on_result=lambda name, res: print_metrics(name, res["metrics"]))
    except (ValueError, OSError) as exc:
        fail(exc)
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
        atomic_write_json(report, json_safe(payload))
        table = to_markdown_table({n: r["metrics"] for n, r in results.items()}, list(DEFAULT_METRICS))
        atomic_write_text(report.with_suffix(".md"), table + "\n")
        console.print(f"report → {report} and {report.with_suffix('.md')}", markup=False)


def _evaluate_task(
    dataset: str, test: Path | None, split: str | None, model: Path | None, options: dict[str, Any], report: Path | None
) -> None:
    from medrank.metrics import to_markdown_table
    from medrank.utils.io import atomic_write_json, atomic_write_text

    if dataset not in EVALUATORS:
        from medrank.retrieval.concept_data import DATASETS

        fail(f"unknown dataset {dataset!r}; known: {sorted([*DATASETS, *EVALUATORS])}")
    try:
        payload = EVALUATORS[dataset](test, split, model, options)
    except (ValueError, OSError) as exc:
        fail(exc)
    systems = payload.get("systems", {})
    metric_names = payload.get("metric_names") or sorted({m for r in systems.values() for m in r})
    for name, metrics in systems.items():
        print_metrics(name, metrics)
    if report is not None:
        atomic_write_json(report, json_safe(payload))
        # an evaluator whose values are already percentages says so with metric_scale = 1
        table = to_markdown_table(systems, metric_names, scale=payload.get("metric_scale", 100))
        atomic_write_text(report.with_suffix(".md"), table + "\n")
        console.print(f"report → {report} and {report.with_suffix('.md')}", markup=False)


@app.command()
def train(
    config_path: Annotated[Path, typer.Argument(help="JSON or YAML config with a 'task' key.", metavar="CONFIG")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Run directory (default: from the config).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue after the last complete checkpoint.")] = True,
    option: Annotated[list[str], typer.Option("--set", help="Replace a top-level config key: KEY=VALUE, the value read as "
                                                            "JSON where it is JSON (repeatable).")] = [],  # noqa: B006
) -> None:
    """Train a model from a config file; checkpoints every epoch and resumes after interruption."""
    from medrank.registry import TRAINERS, read_config

    try:
        cfg = read_config(config_path)
    except (ValueError, OSError) as exc:
        fail(exc)
    overrides = parse_options(option)
    if "task" in overrides:
        fail("--set cannot change the task; give a config of that task")
    cfg.update(overrides)  # the task's own config reader checks them as it checks the file's keys
    task = cfg["task"]
    if task not in TRAINERS:
        fail(f"unknown task {task!r} in {config_path}; known tasks: {sorted(TRAINERS)}")
    output_dir = out or Path(cfg.get("output_dir", Path("runs") / f"{task}-{config_path.stem}"))
    try:
        summary = TRAINERS[task](cfg, output_dir, resume)
    except FloatingPointError as exc:
        fail(f"{exc}: the training diverged; try a lower lr, then --no-resume")
    except (ValueError, OSError) as exc:
        fail(exc)
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
        out.setdefault("errors", []).append(f"{path}: {error_message(exc)}")
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
        fail(f"{path} does not exist")
    if not path.is_dir():
        fail(f"{path} is a file; medrank artefacts are folders")
    try:
        summary = run_summary(path)
    except OSError as exc:  # e.g. an unreadable folder
        fail(exc)
    if as_json:
        console.print_json(json.dumps(summary, ensure_ascii=False))
        if summary["kind"] is None:
            raise typer.Exit(code=2)
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
    if summary["kind"] is None:
        # the summary above still helps (an unfinished run's checkpoints), but a script must see the failure
        print_error(f"{path} holds no artefact medrank.load can open: {summary['not_loadable']}")
        raise typer.Exit(code=2)


EXAMPLES_ZH = ["左膝退变伴游离体", "糖尿病反复低血糖", "头痛头晕", "陈旧型心梗", "右乳腺癌IV期"]


@app.command()
def demo(
    queries: Annotated[list[str] | None, typer.Argument(help="Queries (default: five real CHIP-CDN style examples).")] = None,
    method: Annotated[str, typer.Option(help="bm25 | dense | hybrid")] = "hybrid",
    rebuild: Annotated[bool, typer.Option(help="Rebuild the cached index.")] = False,
    k: Annotated[int, typer.Option("-k")] = 5,
) -> None:
    """A one-shot CLI check (the main job is `medrank serve`): index the 40k-row ICD-10 Beijing vocabulary (CHIP-CDN) and answer example queries.

    The index is built once with the offline e5-small encoder and cached under
    ``$MEDRANK_CACHE`` (default ``~/.cache/medrank``); later runs start in seconds.
    """
    from medrank.retrieval.build import build_retriever
    from medrank.retrieval.concept import ConceptRetriever

    if method not in ("bm25", "dense", "hybrid"):
        fail(f"unknown method {method!r}; available: bm25, dense, hybrid")
    if k < 1:
        fail("-k must be >= 1")
    if queries:
        check_queries(queries)
    target = config.cache_dir() / "indexes" / f"chip-cdn-vocab-{method}"
    t0 = time.perf_counter()
    if rebuild or not (target / "index" / "manifest.json").exists():
        console.print(f"building the {method} index over the ICD-10 Beijing vocabulary (first run only)…", markup=False)
        try:
            retriever = build_retriever("chip-cdn", "vocab", method, None, data_root=STATE["data"])
        except (ValueError, OSError) as exc:
            fail(exc)
        retriever.save(target)
    else:
        retriever = ConceptRetriever.load(target)
    console.print(f"{len(retriever.concepts):,} concepts ready in {time.perf_counter() - t0:.1f}s ({target})", markup=False)
    qs = queries or EXAMPLES_ZH
    for q, ranking in zip(qs, retriever.search(qs, k=k), strict=True):
        print_results(q, retriever.describe(ranking))


cache_app = typer.Typer(help="The procedure pipeline's frozen-bottom cache: list and prune.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


@cache_app.command("list")
def cache_list() -> None:
    """Entries of the caches that grow with use ($MEDRANK_CACHE/procedures-frozen, $MEDRANK_CACHE/onnx), least
    recently used first."""
    from rich.table import Table

    from medrank.cache_admin import default_roots, list_entries

    entries = list_entries()
    table = Table("entry", "size", "days unused")
    for e in entries:
        table.add_row(escape(f"{e.path.parent.name}/{e.path.name}"), f"{e.bytes / 2**20:,.0f} MiB", f"{e.days_unused:.1f}")
    console.print(table)
    roots = ", ".join(str(r) for r in default_roots())
    console.print(f"{roots}: {len(entries)} entries, {sum(e.bytes for e in entries) / 2**20:,.0f} MiB", markup=False)


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
        fail(exc)
    for e in done:
        console.print(f"{'removed' if yes else 'would remove'} {e.path} ({e.bytes / 2**20:,.0f} MiB, {e.days_unused:.1f} days unused)", markup=False)
    total = sum(e.bytes for e in done) / 2**20
    console.print(f"{len(done)} entries, {total:,.0f} MiB{'' if yes else ' (dry run: add --yes to remove)'}", markup=False)
    if failed:
        fail(f"could not remove {len(failed)} entries: {', '.join(str(e.path) for e in failed)}")


for _module in _PLUGINS:
    if hasattr(_module, "register"):
        _module.register(app)


if __name__ == "__main__":  # pragma: no cover
    app()
