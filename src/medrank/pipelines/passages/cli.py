"""CLI plugin of the answer-passage pipeline (CDV on MedQuAD).

Registers the trainers ``cdv``, ``passage-cross-encoder``, ``passage-dssm`` and
``passage-knrm`` (``medrank train configs/passages/*.json``), the evaluator
``medquad`` (``medrank evaluate --dataset medquad``) and two commands:

* ``medrank index-passages --model RUN --out DIR`` — encode a corpus with a
  trained CDV model into a sentence index (whole visible MedQuAD by default);
* ``medrank ask --index DIR --entity "IgA nephropathy" --aspect symptoms`` —
  ranked answer passages with their per-sentence score curve (``--plot PNG``
  draws the paper's Figure 4 for the best document).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from medrank.registry import register_evaluator, register_trainer


@register_trainer("cdv")
def _train_cdv(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    from medrank.pipelines.passages.cdv import train_cdv

    return train_cdv(config, output_dir, resume)


@register_trainer("passage-cross-encoder")
def _train_cross_encoder(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    from medrank.pipelines.passages.cross_encoder import train_cross_encoder

    return train_cross_encoder(config, output_dir, resume)


@register_trainer("passage-dssm")
def _train_dssm(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    from medrank.pipelines.passages.neural import train_neural

    return train_neural({**config, "model": "dssm"}, output_dir, resume)


@register_trainer("passage-knrm")
def _train_knrm(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    from medrank.pipelines.passages.neural import train_neural

    return train_neural({**config, "model": "knrm"}, output_dir, resume)


@register_evaluator("medquad")
def _evaluate_medquad(test: Path | None, split: str | None, model: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    from medrank.pipelines.passages.evaluation import evaluate_medquad

    return evaluate_medquad(test, split, model, options)


def register(app: typer.Typer) -> None:
    from rich.markup import escape
    from rich.table import Table

    from medrank.console import console, fail

    @app.command("index-passages")
    def index_passages(
        model: Annotated[Path, typer.Option("--model", "-m", help="A CDV run directory (from `medrank train`).")],
        out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write the sentence index to (atomic).")],
        test: Annotated[Path | None, typer.Option("--test", help="Corpus file: MedQuAD XML file/folder or JSONL.")] = None,
        split: Annotated[str, typer.Option(help="all | train | valid (when no --test).")] = "all",
        min_passages: Annotated[int, typer.Option(help="Skip documents with fewer answered passages.")] = 2,
    ) -> None:
        """Encode every sentence of a corpus with a trained CDV model into a passage index."""
        from medrank.data.medquad import load_passage_corpus
        from medrank.pipelines.passages.cdv import TrainedCDV

        try:
            corpus = load_passage_corpus(test, split, min_passages=min_passages)
            cdv = TrainedCDV(model)
        except (ValueError, OSError) as exc:
            fail(exc)
        t0 = time.perf_counter()
        index = cdv.build_index(list(corpus.documents))
        elapsed = time.perf_counter() - t0
        index.save(out)
        console.print(
            f"indexed {len(corpus.documents):,} documents, {len(index):,} passages, {index.n_sentences:,} sentences "
            f"in {elapsed:.1f}s ({len(corpus.documents) / max(elapsed, 1e-9):.1f} docs/s) → {out}", markup=False
        )

    @app.command("ask")
    def ask(
        entity: Annotated[str, typer.Option("--entity", "-e", help="The entity, e.g. 'IgA nephropathy'.")],
        aspect: Annotated[str, typer.Option("--aspect", "-a", help="The aspect, e.g. 'symptoms'.")],
        index_dir: Annotated[Path, typer.Option("--index", "-i", help="An index from `medrank index-passages`.")],
        k: Annotated[int, typer.Option("-k", help="How many passages to return.")] = 5,
        entity_weight: Annotated[float | None, typer.Option(help="Weight of the entity score (default 0.5).")] = None,
        plot: Annotated[Path | None, typer.Option(help="Write the per-sentence score curve of the top document (PNG).")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON (with the score curves).")] = False,
    ) -> None:
        """Answer passages for an (entity, aspect) query, best first, with their per-sentence scores."""
        from medrank.pipelines.passages.index import CDVIndex, plot_score_curve

        if k < 1:
            fail("-k must be >= 1")
        try:
            index = CDVIndex.load(index_dir)
            ranking = index.search(entity, aspect, k=k, entity_weight=entity_weight)
        except (ValueError, OSError) as exc:
            fail(exc)
        rows = []
        for pid, score in zip(ranking.ids, ranking.scores, strict=True):
            p = index.passages[index.passage_index[pid]]
            curve = index.score_curve(entity, aspect, p["doc_id"], entity_weight)
            span = next(s for s in curve["passages"] if s[0] == pid)
            rows.append(
                {
                    "passage_id": pid,
                    "document": curve["document"]["title"],
                    "aspect": p["label"],
                    "score": round(score, 4),
                    "sentence_scores": [round(float(x), 4) for x in curve["scores"][span[2] : span[3]]],
                    "text": p["text"],
                }
            )
        if plot is not None and rows:
            top_doc = index.passages[index.passage_index[rows[0]["passage_id"]]]["doc_id"]
            plot_score_curve(index.score_curve(entity, aspect, top_doc, entity_weight), plot, f"{entity} — {aspect}")
        if as_json:
            console.print_json(json.dumps({"entity": entity, "aspect": aspect, "results": rows}, ensure_ascii=False))
            return
        table = Table(title=escape(f"{entity} — {aspect}"), title_justify="left", show_lines=True)
        table.add_column("#", justify="right")
        table.add_column("document / aspect")
        table.add_column("score", justify="right")
        table.add_column("sentence scores")
        table.add_column("passage")
        for rank, r in enumerate(rows, 1):
            curve = " ".join(f"{s:.2f}" for s in r["sentence_scores"][:12]) + (" …" if len(r["sentence_scores"]) > 12 else "")
            text = r["text"] if len(r["text"]) <= 300 else r["text"][:300] + "…"
            table.add_row(str(rank), escape(f"{r['document']}\n[{r['aspect']}]"), f"{r['score']:.4f}", curve, escape(text))
        console.print(table)
        if plot is not None:
            console.print(f"score curve → {plot}", markup=False)
