"""BC5CDR carve-out: document split, chemical vocabulary from annotated names, MEDIC augmentation, CLI datasets."""

from __future__ import annotations

from pathlib import Path

import pytest

from medrank.data import parse_pubtator
from medrank.data.bc5cdr import (
    augment_vocabulary,
    count_unseen,
    load_bc5cdr_carve_out,
    mention_vocabulary,
    split_documents,
)
from medrank.records import Concept


def doc(pmid: str, title: str, abstract: str, *anns: tuple[str, str, str] | tuple[str, str, str, str]) -> str:
    """A PubTator document; each annotation is (mention, type, ids[, individual mentions]), offsets found in the text."""
    text = f"{title} {abstract}"
    lines = [f"{pmid}|t|{title}", f"{pmid}|a|{abstract}"]
    after: dict[str, int] = {}
    for mention, etype, ids, *individual in anns:
        start = text.index(mention, after.get(mention, 0))  # a repeated mention: its next occurrence
        after[mention] = start + 1
        lines.append("\t".join([pmid, str(start), str(start + len(mention)), mention, etype, ids, *individual]))
    return "\n".join(lines) + "\n\n"


CDR = "".join([
    doc("1", "Aspirin caused asthma.", "Aspirin again.", ("Aspirin", "Chemical", "D001241"), ("Aspirin", "Chemical", "D001241"),
        ("asthma", "Disease", "D001249")),
    doc("2", "ASPIRIN and salicylic acid.", "No effect.", ("ASPIRIN", "Chemical", "D001241"),
        ("salicylic acid", "Chemical", "MESH:D020156")),
    doc("3", "Uric acid salts.", "Fine.", ("Uric acid salts", "Chemical", "D014527|D012492")),
    doc("4", "Lithium and haloperidol gave tremor.", "x", ("Lithium and haloperidol", "Chemical", "D008094|D006220",
        "Lithium|haloperidol"), ("tremor", "Disease", "D014202")),
    doc("5", "Drug Q, unknown.", "Cocaine too.", ("Drug Q", "Chemical", "-1"), ("Cocaine", "Chemical", "D003042")),
])

MEDIC = "D001249||Asthma|Bronchial Asthma\nD014202||Tremor\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "bc5cdr").mkdir()
    (tmp_path / "bc5cdr" / "CDR_TrainingSet.PubTator.txt").write_text(CDR, encoding="utf-8")
    (tmp_path / "ncbi-disease").mkdir()
    (tmp_path / "ncbi-disease" / "medic_06Jul2012.txt").write_text(MEDIC, encoding="utf-8")
    return tmp_path


def test_mention_vocabulary_groups_names_by_id(root: Path) -> None:
    docs = parse_pubtator(root / "bc5cdr" / "CDR_TrainingSet.PubTator.txt")
    vocab = {c.id: c for c in mention_vocabulary(docs, "Chemical")}
    # "Aspirin" twice as written, "ASPIRIN" once: one lower-cased form, its most frequent spelling is the name
    assert vocab["D001241"].names == ("Aspirin",)
    assert vocab["D020156"].name == "salicylic acid"  # the MESH: prefix is dropped, as for NCBI ids
    # a composite with one individual mention per id names each id; "Uric acid salts" (no list) names neither
    assert vocab["D008094"].names == ("Lithium",) and vocab["D006220"].names == ("haloperidol",)
    assert "D014527" not in vocab and "D012492" not in vocab
    assert set(vocab) == {"D001241", "D020156", "D008094", "D006220", "D003042"}  # "-1" gives nothing
    assert [c.id for c in mention_vocabulary(docs, "Disease")] == ["D001249", "D014202"]


def test_split_documents_is_fixed_by_the_seed_and_keeps_documents_whole(root: Path) -> None:
    docs = parse_pubtator(root / "bc5cdr" / "CDR_TrainingSet.PubTator.txt")
    train, held = split_documents(docs, 0.4, 13)
    assert len(held) == 2 and len(train) == 3
    assert {d.pmid for d in train}.isdisjoint(d.pmid for d in held)
    again_train, again_held = split_documents(docs, 0.4, 13)
    assert [d.pmid for d in again_held] == [d.pmid for d in held]
    assert [d.pmid for d in train] == sorted((d.pmid for d in train), key=int)  # file order kept
    with pytest.raises(ValueError, match="fraction"):
        split_documents(docs, 1.0, 13)


def test_augment_and_unseen() -> None:
    medic = (Concept("D1", "Asthma", ("Bronchial Asthma",), ("OMIM:1",)), Concept("D2", "Tremor"))
    extra = (Concept("OMIM:1", "asthmatic", ("ASTHMA",)), Concept("D9", "not in MEDIC"))
    out = {c.id: c for c in augment_vocabulary(medic, extra)}
    # resolved through the alt id; "ASTHMA" is already a name (case-insensitively); D9 has no concept to join
    assert out["D1"].names == ("Asthma", "Bronchial Asthma", "asthmatic")
    assert out["D2"] is medic[1] and set(out) == {"D1", "D2"}
    docs = parse_pubtator_text(CDR)
    assert count_unseen(docs, (Concept("D001241", "aspirin"),), "Chemical") == 4  # salicylic, uric (both ids), Li+hal, cocaine


def parse_pubtator_text(text: str):
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as fh:
        fh.write(text)
    try:
        return parse_pubtator(fh.name)
    finally:
        Path(fh.name).unlink()


def test_carve_out_chemicals_against_the_training_part(root: Path) -> None:
    part = load_bc5cdr_carve_out("Chemical", root=root, fraction=0.4, seed=13)
    train_pmids = {q.meta["pmid"] for q in part.train.queries}
    test_pmids = {q.meta["pmid"] for q in part.test.queries}
    assert train_pmids.isdisjoint(test_pmids)
    vocab_ids = {c.id for c in part.vocabulary}
    # the vocabulary comes from the training part only; held-out mentions with other ids are counted, not queried
    train_docs, held_docs = split_documents(parse_pubtator(root / "bc5cdr" / "CDR_TrainingSet.PubTator.txt"), 0.4, 13)
    assert vocab_ids == {c.id for c in mention_vocabulary(train_docs, "Chemical")}
    held = [a for d in held_docs for a in d.annotations if a.type == "Chemical"]
    assert part.no_id == sum(1 for a in held if not a.ids)
    assert part.unseen + part.no_id + len(part.test.queries) == len(held)
    for q in part.test.queries:
        assert set(part.test.qrels.relevant(q.id)) <= vocab_ids
    assert part.vocabulary_source.startswith("training-part chemical names")


def test_carve_out_diseases_against_medic(root: Path) -> None:
    part = load_bc5cdr_carve_out("Disease", root=root, fraction=0.4, seed=13, augment=True)
    assert {c.id for c in part.vocabulary} == {"D001249", "D014202"}
    everything = [*part.train.queries, *part.test.queries]
    assert sorted(q.text for q in everything) == ["asthma", "tremor"]
    with pytest.raises(ValueError, match="entity type"):
        load_bc5cdr_carve_out("Gene", root=root)


def test_eval_sets_by_name(root: Path) -> None:
    from medrank.retrieval.concept_data import load_candidates, load_eval_set

    test = load_eval_set("bc5cdr-chemical", root=root)
    train = load_eval_set("bc5cdr-chemical", "train", root=root)
    assert test.name.endswith(":test") and train.name.endswith(":train")
    assert load_candidates("bc5cdr-chemical", "gold", test, root=root) == test.vocabulary
    with pytest.raises(ValueError, match="split must be"):
        load_eval_set("bc5cdr-disease", "devel", root=root)
    # an independent file: chemicals against the names of all visible training documents
    other = root / "other.txt"
    other.write_text(doc("9", "Cocaine and lithium.", "x", ("Cocaine", "Chemical", "D003042"),
                         ("lithium", "Chemical", "D008094")), encoding="utf-8")
    independent = load_eval_set("bc5cdr-chemical", test_file=other, root=root)
    assert [q.text for q in independent.queries] == ["Cocaine", "lithium"]


def test_cli_evaluates_the_carve_out(root: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from medrank.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["--data", str(root), "evaluate", "--dataset", "bc5cdr-chemical", "--split", "train",
                              "--method", "bm25"])
    assert res.exit_code == 0, res.output
    # every training-part chemical is a name of the vocabulary built from the training part
    assert "acc@1=1.0000" in res.output
    res = runner.invoke(app, ["--data", str(root), "evaluate", "--dataset", "bc5cdr-disease", "--index", str(tmp_path),
                              "--search", "ivf"])
    assert res.exit_code != 0 and "search must be 'exact' or 'hnsw'" in res.output


def test_a_form_annotated_with_several_ids_names_the_most_frequent_one() -> None:
    docs = parse_pubtator_text("".join([
        doc("1", "Cancer and cancer.", "Tumour.", ("Cancer", "Disease", "D2"), ("cancer", "Disease", "D1"),
            ("Tumour", "Disease", "D1")),
        doc("2", "A cancer.", "x", ("cancer", "Disease", "D1")),
        doc("3", "Polyps.", "polyps", ("Polyps", "Disease", "D3"), ("polyps", "Disease", "D4")),
    ]))
    vocab = {c.id: c.names for c in mention_vocabulary(docs)}
    # "cancer": D1 twice, D2 once; "polyps": once each, the smallest id keeps it; D2 and D4 name nothing else
    assert vocab == {"D1": ("cancer", "Tumour"), "D3": ("Polyps",)}
