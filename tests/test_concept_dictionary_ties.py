"""BioSyn's dictionary: an exact tie between one name under two concepts goes to the concept the corpus annotates
most; a mention that is itself a dictionary name is looked up as written, not expanded; a moved run keeps its encoder."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from medrank.data import parse_pubtator
from medrank.data.ncbi import augment_vocabulary, mention_vocabulary
from medrank.index import CharTfidfIndex
from medrank.index.char_tfidf import rank_entries
from medrank.records import Concept, ConceptDataset, Qrels, Query
from medrank.retrieval.concept import concept_entries

MEDIC = (
    Concept("OMIM:160900", "Dystrophia myotonica 1", ("DM", "Steinert disease")),
    Concept("OMIM:106210", "Aniridia, type 2", ("ANIRIDIA",)),
    Concept("D015783", "Aniridia"),
    Concept("D009223", "Myotonic Dystrophy"),
)


def _top(vocabulary: tuple[Concept, ...], text: str) -> str:
    ids, texts, items = concept_entries(vocabulary)
    sparse = CharTfidfIndex().build(ids, texts, items)
    return rank_entries("q", sparse.entry_scores([text])[0], np.array(items, dtype=object), 2).ids[0]


def test_an_exact_tie_goes_to_the_concept_the_corpus_annotates_most() -> None:
    # the corpus annotates "DM" with D009223 and "aniridia" with D015783 more often than with the OMIM entries
    extra = (Concept("D009223", "DM"), Concept("D015783", "aniridia"), Concept("OMIM:106210", "AN2"))
    out = augment_vocabulary(MEDIC, extra)
    assert [c.id for c in out] == ["D009223", "D015783", "OMIM:106210", "OMIM:160900"]
    assert out[0].names == ("Myotonic Dystrophy", "DM") and out[1].names == ("Aniridia",)
    assert _top(out, "DM") == "D009223" and _top(out, "aniridia") == "D015783"
    # MEDIC's own order gives the tie to whichever concept it lists first
    assert _top(MEDIC, "DM") == "OMIM:160900" and _top(MEDIC, "aniridia") == "OMIM:106210"


def _doc(pmid: str, title: str, spans: list[tuple[str, str]]) -> str:
    lines = [f"{pmid}|t|{title}", f"{pmid}|a|"]
    start = 0
    for mention, cid in spans:
        start = title.index(mention, start)
        lines.append(f"{pmid}\t{start}\t{start + len(mention)}\t{mention}\tDisease\t{cid}")
        start += len(mention)
    return "\n".join(lines) + "\n\n"


def test_mention_concepts_come_most_annotated_first(tmp_path: Path) -> None:
    text = (_doc("1", "aniridia and DM and DM", [("aniridia", "D015783"), ("DM", "D009223"), ("DM", "D009223")])
            + _doc("2", "DM with aniridia", [("DM", "D009223"), ("aniridia", "OMIM:106210")]))
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    vocab = mention_vocabulary(parse_pubtator(path))
    # D009223: 3 annotations; "aniridia" once with each id: it names the smallest id (D015783), OMIM:106210 none
    assert [(c.id, c.names) for c in vocab] == [("D009223", ("DM",)), ("D015783", ("aniridia",))]


def test_a_mention_that_is_a_dictionary_name_is_looked_up_as_written() -> None:
    from medrank.pipelines.symptom.biosyn import exact_names_as_written

    qrels = Qrels()
    for qid in "abc":
        qrels.add(qid, "D009223")
    queries = (Query("a", "myotonic dystrophy", {"unexpanded": "DM", "pmid": "1"}),
               Query("b", "myotonic dystrophy type", {"unexpanded": "MDT", "pmid": "1"}),
               Query("c", "plain", {"pmid": "2"}))
    ds = ConceptDataset("x", queries, qrels, MEDIC)
    out = exact_names_as_written(ds, ["Dystrophia myotonica 1", "dm"])
    assert [q.text for q in out.queries] == ["DM", "myotonic dystrophy type", "plain"]
    assert out.queries[0].meta == {"pmid": "1"} and out.queries[1] is queries[1]


def test_a_run_moved_elsewhere_keeps_its_trained_encoder(tmp_path: Path, tiny_encoder) -> None:
    from medrank.encoders import load_encoder
    from medrank.retrieval.concept import ConceptRetriever

    run = tmp_path / "run"
    tiny_encoder.save(run / "model")
    encoder = load_encoder(str((run / "model").resolve()))
    ConceptRetriever.build(list(MEDIC), method="dense", encoder=encoder).save(run / "index")
    before = ConceptRetriever.load(run / "index").search(["DM"], k=2)[0]
    moved = tmp_path / "elsewhere"
    shutil.move(str(run), str(moved))
    after = ConceptRetriever.load(moved / "index").search(["DM"], k=2)[0]
    assert after.ids == before.ids and np.allclose(after.scores, before.scores, atol=1e-5)
