"""CLI plugin of the similar-question pipeline.

Registers

* the trainer task ``similar`` (``medrank train configs/similar/<dataset>/<model>.yaml``),
* evaluators for ``chip-sts``, ``kuake-qqr``, ``medical-question-pairs`` and
  ``rqe`` (``medrank evaluate --dataset chip-sts --model RUN [--test FILE]``),
* ``medrank similar "<question>"`` — BM25 top-20 recall + matcher re-ranking
  over a question corpus,
* ``medrank make-pairs`` — labelled training pairs from an unlabelled question list.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from medrank.data.questions import PAIR_DATASETS, load_question_pairs
from medrank.registry import register_evaluator, register_trainer


@register_trainer("similar")
def train_similar(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    """``medrank train`` entry point: one configured experiment (see :mod:`.experiment`)."""
    from medrank.pipelines.similar.experiment import run_experiment

    summary = run_experiment(config, output_dir, resume=resume)
    return {k: v for k, v in summary.items() if k != "history"} | {"output_dir": str(output_dir)}


def _make_evaluator(dataset: str) -> Any:
    def evaluate(test: Path | None, split: str | None, model: Path | None, options: dict[str, Any]) -> dict[str, Any]:
        from medrank.pipelines.similar.evaluation import evaluate_pairs

        return evaluate_pairs(dataset, test, split, model, options)

    evaluate.__name__ = f"evaluate_{dataset.replace('-', '_')}"
    return evaluate


for _name in PAIR_DATASETS:
    register_evaluator(_name)(_make_evaluator(_name))


def register(app: typer.Typer) -> None:
    """Add ``similar`` and ``make-pairs`` to the ``medrank`` app."""

    @app.command()
    def similar(
        questions: Annotated[list[str], typer.Argument(help="One or more new questions.")],
        model: Annotated[Path | None, typer.Option("--model", "-m", help="A run directory from `medrank train` (its matcher re-ranks).")] = None,
        corpus: Annotated[Path | None, typer.Option(help="Question corpus: a .txt (one per line) or .jsonl file.")] = None,
        dataset: Annotated[list[str], typer.Option(help="Use the questions of these pair datasets as the corpus (repeatable).")] = [],  # noqa: B006
        index_dir: Annotated[Path | None, typer.Option("--index", help="A saved recall index (from --save-index).")] = None,
        save_index: Annotated[Path | None, typer.Option(help="Save the recall index built here.")] = None,
        language: Annotated[str | None, typer.Option(help="zh | en (default: the model's, else guessed).")] = None,
        recall: Annotated[str, typer.Option(help="bm25 | dense | hybrid")] = "bm25",
        encoder: Annotated[str | None, typer.Option(help="Encoder for dense/hybrid recall (default e5-small / minilm).")] = None,
        k: Annotated[int, typer.Option("-k", help="How many similar questions to show.")] = 5,
        recall_k: Annotated[int, typer.Option(help="Candidates recalled before re-ranking.")] = 20,
        rerank: Annotated[bool, typer.Option("--rerank/--no-rerank", help="Without --model: re-rank the recalled "
                                             "candidates by the cosine of the pretrained encoder (--encoder; what the "
                                             "service serves with no trained matcher); --no-rerank keeps the recall "
                                             "order.")] = True,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """Find solved questions similar to a new one: BM25 top-20 recall, re-ranked by the matcher (without one, by a
        pretrained encoder's cosine).

        Without --corpus/--dataset/--index the corpus is every question of the
        language's pair datasets (Chinese: CHIP-STS + KUAKE-QQR; English: MQP +
        RQE + MedQuAD), indexed once and cached.
        """
        from rich.table import Table

        from medrank.console import console, fail, print_refusal
        from medrank.pipelines.similar.corpus import guess_language, language_corpus, read_question_file
        from medrank.pipelines.similar.matchers import load_matcher
        from medrank.pipelines.similar.retrieval import SimilarQuestionSearcher, cached_searcher
        from medrank.text import language_refusal

        if k < 1 or recall_k < 1:
            fail("-k and --recall-k must be >= 1")

        def report(payload: list[dict[str, Any]], status: str | None) -> None:
            """Each question's similar questions (a table), or why it was not searched; exit status 1 if one was not."""
            if as_json:
                console.print_json(json.dumps(payload, ensure_ascii=False))
            else:
                if status:
                    console.print(status)
                for item in payload:
                    if "error" in item:
                        print_refusal(item["question"], item["error"])
                        continue
                    table = Table(title=escape(item["question"]), title_justify="left")  # user text, not markup
                    table.add_column("#", justify="right")
                    table.add_column("similar question")
                    table.add_column("match", justify="right")
                    table.add_column("recall", justify="right")
                    table.add_column("same question", justify="right")
                    for rank, row in enumerate(item["results"], 1):
                        match = "-" if row["match_score"] is None else f"{row['match_score']:.3f}"
                        same = "-" if row["probability"] is None else f"{100 * row['probability']:.0f} %"
                        table.add_row(str(rank), escape(row["text"]), match, f"{row['recall_score']:.2f}", same)
                    console.print(table)
            if any("error" in item for item in payload):
                raise typer.Exit(1)

        try:
            matcher = load_matcher(model) if model is not None else None
            lang = language or (getattr(getattr(matcher, "spec", None), "language", None))
            # a question in neither language (or not the matcher's) is reported, not searched, unless --language says
            refused = {} if language is not None else {
                q: f"not searched: {why} (pass --language {lang or 'en or zh'} to search anyway)"
                for q in questions if (why := language_refusal(q, lang)) is not None
            }
            asked = questions
            questions = [q for q in questions if q not in refused]
            if not questions:
                report([{"question": q, "error": refused[q]} for q in asked], None)
            pretrained = None  # the encoder of a dense / hybrid recall, and of the zero-shot re-ranking
            if recall != "bm25" or (matcher is None and rerank):
                from medrank.encoders import load_encoder

                pretrained = load_encoder(encoder or ("e5-small" if (lang or guess_language(questions)) == "zh"
                                                      else "minilm"))
            if matcher is None and rerank:
                from medrank.pipelines.similar.zero_shot import EncoderCosineMatcher

                matcher = EncoderCosineMatcher(pretrained)
            enc = pretrained if recall != "bm25" else None  # what the recall index encodes with
            t0 = time.perf_counter()
            if index_dir is not None:
                searcher = SimilarQuestionSearcher.load(index_dir, matcher, recall_k, **({"encoder": enc} if enc else {}))
            else:
                if corpus is not None:
                    texts = read_question_file(corpus)
                elif dataset:
                    texts = []
                    for d in dataset:
                        if d not in PAIR_DATASETS:
                            fail(f"unknown dataset {d!r}; known: {sorted(PAIR_DATASETS)}")
                        from medrank.data.questions import unique_questions

                        texts += unique_questions(load_question_pairs(d))
                    texts = list(dict.fromkeys(texts))
                else:
                    lang = lang or guess_language(questions)
                    texts = language_corpus(lang)
                lang = lang or guess_language(texts)
                searcher = cached_searcher(texts, lang, matcher, recall, enc, recall_k)
            if save_index is not None:
                searcher.save(save_index)
            if model is None and pretrained is not None and (rerank or recall == "dense"):
                # the list is ordered by the encoder's cosine: the shipped calibration (for the default encoders) reads it
                from medrank.pipelines.similar.zero_shot import shipped_cosine_calibration

                searcher.calibration = shipped_cosine_calibration(lang or guess_language(questions), pretrained.name)
            ready = time.perf_counter() - t0
            t1 = time.perf_counter()
            results = searcher.search_many(questions, k=k, recall_k=recall_k)
            per_query_ms = (time.perf_counter() - t1) * 1000 / len(questions)
        except (ValueError, OSError) as exc:
            fail(exc)
        found = dict(zip(questions, results, strict=True))
        report([{"question": q, "error": refused[q]} if q in refused else {"question": q, "results": [r.to_dict() for r in found[q]]}
                for q in asked],
               f"{len(searcher):,} questions indexed (ready in {ready:.1f}s); {per_query_ms:.1f} ms per question")

    @app.command("make-pairs")
    def make_pairs(
        out: Annotated[Path, typer.Option("--out", "-o", help="Output JSON-lines pair file.")],
        questions: Annotated[Path | None, typer.Argument(help="Question list: .txt (one per line) or .jsonl.")] = None,
        dataset: Annotated[list[str], typer.Option(help="Take the (unlabelled) questions of these pair datasets (repeatable).")] = [],  # noqa: B006
        language: Annotated[str | None, typer.Option(help="zh | en (default: guessed from the text).")] = None,
        n_queries: Annotated[int | None, typer.Option(help="Sample this many query questions (default: all).")] = None,
        top_k: Annotated[int, typer.Option(help="BM25 candidates per query.")] = 20,
        positive_min: Annotated[float, typer.Option(help="Positive if score in [positive_min, 1).")] = 0.9,
        negative_max: Annotated[float, typer.Option(help="Negative if score in [0, negative_max].")] = 0.6,
        ratio: Annotated[float, typer.Option(help="Negatives per positive.")] = 3.0,
        seed: Annotated[int, typer.Option(help="Sampling seed.")] = 13,
    ) -> None:
        """Turn any question list into labelled training pairs (BM25 top-20 + word-vector cosine)."""
        from medrank.console import console, fail
        from medrank.data.questions import unique_questions, write_pairs_jsonl
        from medrank.pipelines.similar.corpus import guess_language, read_question_file
        from medrank.pipelines.similar.pairs import PairGenerationConfig, generate_pairs

        if questions is None and not dataset:
            fail("give a question file or --dataset")
        try:
            texts: list[str] = read_question_file(questions) if questions is not None else []
            for d in dataset:
                if d not in PAIR_DATASETS:
                    fail(f"unknown dataset {d!r}; known: {sorted(PAIR_DATASETS)}")
                texts += unique_questions(load_question_pairs(d))
            lang = language or guess_language(texts)
            cfg = PairGenerationConfig(top_k=top_k, positive=(positive_min, 1.0), negative=(0.0, negative_max),
                                       negatives_per_positive=ratio, n_queries=n_queries, seed=seed)
            pairs, stats = generate_pairs(texts, lang, cfg)
            write_pairs_jsonl(pairs, out)
        except (ValueError, OSError) as exc:
            fail(exc)
        console.print(f"{stats['pairs']:,} pairs ({stats['positives']:,} positive, {stats['negatives']:,} negative) "
                        f"from {stats['questions']:,} questions → {out}")
