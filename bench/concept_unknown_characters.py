"""Zero-shot CHIP-CDN retrieval with e5-small, with and without tokens for the characters it cannot spell.

e5-small's SentencePiece vocabulary maps 80 characters of the ICD-10 Beijing names to ``<unk>``
(桡 髌 跖 蛲 绦 疖 痈 …): 806 of the 37,645 names hold one, and 106 of them collapse into 45 groups of
identical token sequences (绦虫病 = 蛲虫病, 桡骨/髌骨/跖骨/颞骨 恶性肿瘤, …), which no dense index can tell
apart. ``TransformerEncoder.add_characters`` (``medrank.encoders.vocab``, used by MTCG's
``add_unknown_characters``) gives each such character of the indexed names a token and a seeded
embedding row. This bench asks whether that helps retrieval *without training*: the same protocol as
``bench/concept_zero_shot.py`` (CHIP-CDN valid side of the seed-13 split, 1,200 queries; candidates =
the train file's gold names, or the whole vocabulary), dense and hybrid (RRF with BM25) with e5-small.

    python bench/concept_unknown_characters.py [--threads 2]
"""

from __future__ import annotations

import argparse

import common

from medrank.config import cache_dir, data_root, seed_everything, set_threads
from medrank.encoders import CachedEncoder, load_encoder
from medrank.encoders.vocab import unknown_characters
from medrank.index import HybridIndex
from medrank.metrics import to_markdown_table
from medrank.retrieval.concept import DEFAULT_METRICS, ConceptRetriever, concept_entries, evaluate_retriever
from medrank.retrieval.concept_data import load_candidates, load_eval_set


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    eval_set = load_eval_set("chip-cdn", "valid")
    results, sections = [], []
    for cand in ("gold", "vocab"):
        concepts = load_candidates("chip-cdn", cand, eval_set=eval_set)
        _, texts, _ = concept_entries(concepts)
        bm25 = ConceptRetriever.build(concepts, method="bm25", language="zh")
        rows = {}
        shipped_tokenizer = load_encoder("e5-small").tokenizer
        groups: dict[tuple[int, ...], set[str]] = {}
        for text, ids in zip(texts, shipped_tokenizer(texts, add_special_tokens=False)["input_ids"], strict=True):
            groups.setdefault(tuple(ids), set()).add(text)
        collisions = [g for g in groups.values() if len(g) > 1]
        unk = set(unknown_characters(shipped_tokenizer, texts))
        facts = (f"{len(unk)} characters of the names are `<unk>` to e5-small, {sum(1 for t in set(texts) if unk & set(t)):,} "
                 f"names hold one, and {sum(len(g) for g in collisions)} names fall into {len(collisions)} groups of identical "
                 f"token sequences (e.g. {' = '.join(sorted(max(collisions, key=len))) if collisions else '-'})")
        for added in (False, True):
            encoder = load_encoder("e5-small")
            if added:
                encoder.add_characters(unknown_characters(encoder.tokenizer, texts), seed=args.seed)
            spelled_unk = set(unknown_characters(encoder.tokenizer, [q.text for q in eval_set.queries]))
            queries_with_unk = sum(1 for q in eval_set.queries if spelled_unk & set(q.text))
            dense = ConceptRetriever.build(concepts, method="dense", encoder=CachedEncoder(encoder, cache_dir() / "embeddings"),
                                           language="zh")
            hybrid = ConceptRetriever(HybridIndex.from_built([bm25.index, dense.index], depth=100), concepts)
            label = f"with {len(encoder.added_characters)} added characters" if added else "e5-small as shipped"
            for method, retriever in (("dense", dense), ("hybrid", hybrid)):
                res = evaluate_retriever(retriever, eval_set, DEFAULT_METRICS)
                res.update(candidates=cand, system=f"{method}, {label}", added_characters="".join(encoder.added_characters),
                           queries_with_an_unknown_character=queries_with_unk)
                results.append(res)
                rows[f"{method}, {label}"] = res["metrics"]
                print(cand, method, label, {k: round(100 * v, 2) for k, v in res["metrics"].items()}, flush=True)
        first = next(r for r in results if r["candidates"] == cand)
        shipped = next(r for r in results if r["candidates"] == cand and "shipped" in r["system"])
        added_row = next(r for r in results if r["candidates"] == cand and "added" in r["system"])
        sections.append(
            f"### candidates = {cand} ({first['n_candidates']:,} concepts; {first['n_queries']:,} queries, of which "
            f"{shipped['queries_with_an_unknown_character']} hold a character e5-small spells `<unk>`, "
            f"{added_row['queries_with_an_unknown_character']} after adding those of the names). {facts}.\n\n"
            + to_markdown_table(rows, list(DEFAULT_METRICS)))
    common.write("concept_unknown_characters",
                 {"environment": common.environment(args.threads, args.seed, str(data_root())), "results": results},
                 "# Zero-shot CHIP-CDN retrieval: e5-small with tokens for the characters it cannot spell\n\n"
                 + "\n\n".join(sections)
                 + "\n\nRows added with `TransformerEncoder.add_characters` (seeded draws from the embedding table's "
                   "mean and covariance, untrained). Metrics in %.")


if __name__ == "__main__":
    main()
