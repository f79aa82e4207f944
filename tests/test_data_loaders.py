"""Tests for the concept-normalisation loaders (CHIP-CDN, PubTator, NCBI disease, BC5CDR, splits).

Fast tests build tiny fixture files in ``tmp_path``; tests marked ``slow``
load the real data under the data root and check the counts stated in the
dataset READMEs.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from medrank.config import DataNotFoundError, data_root
from medrank.data import (
    LOADERS,
    DataFormatError,
    concept_id_map,
    count_offset_mismatches,
    gold_terms,
    load_bc5cdr,
    load_chip_cdn,
    load_chip_cdn_mentions,
    load_chip_cdn_vocabulary,
    load_medic,
    load_ncbi_disease,
    normalise_concept_id,
    parse_pubtator,
    split_queries,
    subset,
)
from medrank.records import Concept

# ---------------------------------------------------------------- fixtures

VOCAB_TSV = "code\tname\nA00\t霍乱\nA00.0\t霍乱\nB01\t足骨折,未特指\nC02\t蛔虫病\nD03\t高血压\n"

CHIP_RECORDS = [
    {"text": "霍乱 高血压", "normalized_result": "霍乱##高血压"},
    {"text": "足骨折", "normalized_result": '"足骨折,未特指"'},
    {"text": "足骨折 蛔虫", "normalized_result": '"足骨折,未特指##蛔虫病"'},
    {"text": "腹泻病，高血压", "normalized_result": "O##高血压"},
    {"text": "未知病", "normalized_result": "不存在的名字## 高血压 "},
    {"text": "霍乱 高血压", "normalized_result": "霍乱##高血压"},
    {"text": "高血压高血压", "normalized_result": "高血压##高血压"},
]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


MEDIC = (
    "\n".join(
        [
            "D001||Disease One|Syn One A|Syn One B",
            "D002|100100||Disease Two|Two Syn",
            "C003||Supplementary Three",
            "200200||OMIM ONLY DISEASE|OOD",
            "100100||OMIM 100100 OWN LINE",
            "C||Diseases",
            "D004|D005|300300||Disease Four",
        ]
    )
    + "\n"
)

TITLE1 = "Disease one and disease two."
ABS1 = "Patients had disease two or three, and omim only disease."
TEXT1 = f"{TITLE1} {ABS1}"


def ann(pmid: str, text: str, mention: str, etype: str, ids: str, *extra: str, occurrence: int = 0) -> str:
    start = -1
    for _ in range(occurrence + 1):
        start = text.index(mention, start + 1)
    return "\t".join([pmid, str(start), str(start + len(mention)), mention, etype, ids, *extra])


PUBTATOR = "\n".join(
    [
        f"111|t|{TITLE1}",
        f"111|a|{ABS1}",
        ann("111", TEXT1, "Disease one", "SpecificDisease", " D001"),
        ann("111", TEXT1, "disease two", "Modifier", "OMIM:100100"),
        ann("111", TEXT1, "disease two or three", "CompositeMention", "D002|C003"),
        ann("111", TEXT1, "omim only disease", "SpecificDisease", "200200"),
        ann("111", TEXT1, "disease two", "SpecificDisease", "D999", occurrence=1),
        "",
        "222|t|Short title",
        "222|a|Four and one.",
        ann("222", "Short title Four and one.", "Four and one", "SpecificDisease", "D004+D001"),
        "222\t0\t5\tWRONG\tSpecificDisease\tD005",
        "222\tCID\tD123\tD001",
        "",
        "222|t|Short title",
        "222|a|Four and one.",
        ann("222", "Short title Four and one.", "Four and one", "SpecificDisease", "D004+D001"),
        "222\t0\t5\tWRONG\tSpecificDisease\tD005",
        "222\tCID\tD123\tD001",
        "",
    ]
)

CDR_TEXT = "Drug X induced disease one and disease two. Drug Y was fine, no fever."
CDR = "\n".join(
    [
        "333|t|Drug X induced disease one and disease two.",
        "333|a|Drug Y was fine, no fever.",
        ann("333", CDR_TEXT, "Drug X", "Chemical", "D777"),
        ann(
            "333", CDR_TEXT, "disease one and disease two", "Disease", "D001|D002", "disease one|disease two"
        ),
        ann("333", CDR_TEXT, "Drug Y", "Chemical", "-1"),
        ann("333", CDR_TEXT, "fever", "Disease", "-1"),
        ann("333", CDR_TEXT, "disease one", "Disease", "D066126"),
        "333\tCID\tD777\tD001",
        "",
        "",
    ]
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write(tmp_path / "chip-cdn" / "icd10_beijing_v601.tsv", VOCAB_TSV)
    write(tmp_path / "chip-cdn" / "train.jsonl", jsonl(CHIP_RECORDS))
    write(tmp_path / "ncbi-disease" / "medic_06Jul2012.txt", MEDIC)
    write(tmp_path / "ncbi-disease" / "NCBIdevelopset_corpus.txt", PUBTATOR)
    write(tmp_path / "ncbi-disease" / "NCBItrainset_corpus.txt", PUBTATOR)
    write(tmp_path / "bc5cdr" / "CDR_TrainingSet.PubTator.txt", CDR)
    return tmp_path


# ---------------------------------------------------------------- errors


def test_data_format_error_message_names_file_and_line(tmp_path: Path) -> None:
    err = DataFormatError(tmp_path / "chip-cdn" / "train.jsonl", 17, "field 'normalized_result' missing")
    assert isinstance(err, ValueError)
    assert str(err).endswith("chip-cdn/train.jsonl:17: field 'normalized_result' missing")
    assert err.line == 17 and err.reason == "field 'normalized_result' missing"


# ---------------------------------------------------------------- CHIP-CDN


def test_chip_vocabulary_one_concept_per_distinct_name(root: Path) -> None:
    for arg in (root, root / "chip-cdn", root / "chip-cdn" / "icd10_beijing_v601.tsv"):
        vocab = load_chip_cdn_vocabulary(arg)
        assert [c.id for c in vocab] == ["霍乱", "足骨折,未特指", "蛔虫病", "高血压"]
        assert all(c.id == c.name for c in vocab)
        assert vocab[0].meta["codes"] == ("A00", "A00.0")
        assert vocab[1].meta["codes"] == ("B01",)


def test_chip_mentions_multi_names_quotes_o_and_unmapped(root: Path) -> None:
    ds = load_chip_cdn(root)
    assert ds.name == "chip-cdn/train"
    assert [q.id for q in ds.queries] == [f"train:{i}" for i in range(1, 8)]
    q = {x.id: x for x in ds.queries}
    assert q["train:1"].text == "霍乱 高血压"
    assert dict(ds.qrels["train:1"]) == {"霍乱": 1, "高血压": 1}
    # Quote around a single name, and around a whole multi-name field.
    assert dict(ds.qrels["train:2"]) == {"足骨折,未特指": 1}
    assert list(ds.qrels["train:3"]) == ["足骨折,未特指", "蛔虫病"]
    # "O" is kept as a label; it is not in the vocabulary, so it is unmapped.
    assert list(ds.qrels["train:4"]) == ["O", "高血压"]
    assert q["train:4"].meta["unmapped"] == ("O",)
    # Unknown names are kept in qrels and counted; whitespace is stripped.
    assert list(ds.qrels["train:5"]) == ["不存在的名字", "高血压"]
    assert q["train:5"].meta["unmapped"] == ("不存在的名字",)
    # A name repeated in one record is one label.
    assert dict(ds.qrels["train:7"]) == {"高血压": 1}
    assert ds.unmapped == 2
    assert gold_terms(ds) == ["霍乱", "高血压", "足骨折,未特指", "蛔虫病", "O", "不存在的名字"]


def test_chip_mentions_any_file_same_format(root: Path) -> None:
    dev = write(root / "elsewhere" / "dev.jsonl", jsonl(CHIP_RECORDS[:2]))
    vocab = load_chip_cdn_vocabulary(root)
    ds = load_chip_cdn_mentions(dev, vocab)
    assert [q.id for q in ds.queries] == ["dev:1", "dev:2"]
    assert ds.name == "chip-cdn/dev"
    no_vocab = load_chip_cdn_mentions(dev)
    assert no_vocab.vocabulary == () and no_vocab.unmapped == 0


@pytest.mark.parametrize(
    ("line3", "reason"),
    [
        ('{"text": "x"}', "field 'normalized_result' missing"),
        ('{"normalized_result": "霍乱"}', "field 'text' missing"),
        ('{"text": "x", "normalized_result": "霍乱##"}', "empty name"),
        ('{"text": "  ", "normalized_result": "霍乱"}', "field 'text' is empty"),
        ('{"text": "x", "normalized_result": 3}', "must be a string"),
        ('{"text": "x", "normalized_result": "霍乱"', "invalid JSON"),
        ('["x", "霍乱"]', "expected a JSON object"),
    ],
)
def test_chip_mentions_bad_line(tmp_path: Path, line3: str, reason: str) -> None:
    good = jsonl(CHIP_RECORDS[:2])
    path = write(tmp_path / "train.jsonl", good + line3 + "\n")
    with pytest.raises(DataFormatError) as exc:
        load_chip_cdn_mentions(path)
    assert "train.jsonl:3:" in str(exc.value)
    assert reason in str(exc.value)
    assert exc.value.line == 3


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [
        ("code\tname\nA00\t霍乱\nA01 霍乱\n", 3, "expected 2 tab-separated fields"),
        ("code\tname\nA00\t霍乱\nA01\t\n", 3, "empty name"),
        ("code\tname\nA00\t霍乱\n\tfoo\n", 3, "empty code"),
        ("A00\t霍乱\n", 1, "expected header"),
    ],
)
def test_chip_vocabulary_bad_line(tmp_path: Path, content: str, line: int, reason: str) -> None:
    path = write(tmp_path / "vocab.tsv", content)
    with pytest.raises(DataFormatError) as exc:
        load_chip_cdn_vocabulary(path)
    assert f"vocab.tsv:{line}:" in str(exc.value)
    assert reason in str(exc.value)


def test_missing_dataset_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match="chip-cdn"):
        load_chip_cdn(tmp_path)
    with pytest.raises(DataNotFoundError, match="vocab.tsv"):
        load_chip_cdn_vocabulary(tmp_path / "vocab.tsv")
    with pytest.raises(DataNotFoundError, match="ncbi-disease"):
        load_ncbi_disease(root=tmp_path)


# ---------------------------------------------------------------- PubTator


def test_parse_pubtator_documents_annotations_relations(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        docs = parse_pubtator(root / "bc5cdr" / "CDR_TrainingSet.PubTator.txt")
    assert len(docs) == 1
    d = docs[0]
    assert d.pmid == "333" and d.text == CDR_TEXT and d.line == 1
    assert [a.type for a in d.annotations] == ["Chemical", "Disease", "Chemical", "Disease", "Disease"]
    comp = d.annotations[1]
    assert comp.ids == ("D001", "D002") and comp.raw_id == "D001|D002"
    assert comp.individual_mentions == ("disease one", "disease two")
    assert comp.line == 4
    assert d.annotations[2].ids == () and d.annotations[2].raw_id == "-1"
    assert [(r.type, r.ids) for r in d.relations] == [("CID", ("D777", "D001"))]
    assert count_offset_mismatches(docs) == 0
    assert "do not match" not in caplog.text


def test_parse_pubtator_offset_mismatch_is_counted_not_fatal(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        docs = parse_pubtator(root / "ncbi-disease" / "NCBIdevelopset_corpus.txt")
    assert [d.pmid for d in docs] == ["111", "222", "222"]
    assert count_offset_mismatches(docs) == 2
    bad = docs[1].offset_mismatches
    assert len(bad) == 1 and bad[0].mention == "WRONG" and bad[0].line == 12 and not bad[0].offset_ok
    assert "2 annotation(s) whose offsets do not match" in caplog.text
    assert "WRONG" not in caplog.text  # the line number is logged, never the mention text
    assert docs[1].annotations[0].ids == ("D004", "D001")  # '+' split
    assert docs[0].annotations[0].ids == ("D001",)  # leading space stripped


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("111\tx\t5\tDisease\tSpecificDisease\tD001", "offsets must be integers"),
        ("111\t5\t5\tDisease\tSpecificDisease\tD001", "bad offsets"),
        ("999\t0\t7\tDisease\tSpecificDisease\tD001", "annotation for PMID 999 inside document 111"),
        ("111\t0\t7", "not a title, abstract, annotation or relation line"),
        ("111\t0\t7\tDisease", "annotation line needs 5-7"),
        ("111\t0\t7\t \tSpecificDisease\tD001", "empty mention"),
        ("111|a|second abstract", "second abstract line"),
    ],
)
def test_parse_pubtator_bad_line(tmp_path: Path, bad: str, reason: str) -> None:
    path = write(
        tmp_path / "corpus.txt",
        f"111|t|{TITLE1}\n111|a|{ABS1}\n111\t0\t7\tDisease\tSpecificDisease\tD001\n{bad}\n",
    )
    with pytest.raises(DataFormatError) as exc:
        parse_pubtator(path)
    assert "corpus.txt:4:" in str(exc.value)
    assert reason in str(exc.value)


def test_parse_pubtator_structure_errors(tmp_path: Path) -> None:
    path = write(tmp_path / "c.txt", "111\t0\t7\tDisease\tSpecificDisease\tD001\n")
    with pytest.raises(DataFormatError, match=r"c\.txt:1: .*outside a document"):
        parse_pubtator(path)
    path = write(tmp_path / "c.txt", "111|t|Title\n\n")
    with pytest.raises(DataFormatError, match=r"c\.txt:1: .*title without an abstract"):
        parse_pubtator(path)
    path = write(tmp_path / "c.txt", "111|t|Title\n222|a|Abstract\n")
    with pytest.raises(DataFormatError, match=r"c\.txt:2: .*without its title"):
        parse_pubtator(path)


# ---------------------------------------------------------------- MEDIC / NCBI


def test_normalise_concept_id() -> None:
    assert normalise_concept_id(" 123456") == "OMIM:123456"
    assert normalise_concept_id("OMIM:123456") == "OMIM:123456"
    assert normalise_concept_id("MESH:D001") == "D001"
    assert normalise_concept_id("C003") == "C003"


def test_load_medic(root: Path) -> None:
    vocab = load_medic(root / "ncbi-disease" / "medic_06Jul2012.txt")
    assert [c.id for c in vocab] == ["D001", "D002", "C003", "OMIM:200200", "OMIM:100100", "C", "D004"]
    assert vocab[0].name == "Disease One" and vocab[0].synonyms == ("Syn One A", "Syn One B")
    assert vocab[1].alt_ids == ("OMIM:100100",)
    assert vocab[6].alt_ids == ("D005", "OMIM:300300")
    ids = concept_id_map(vocab)
    assert ids["OMIM:100100"] == ("OMIM:100100", "D002")  # own line first, then the line listing it as alt id
    assert ids["D005"] == ("D004",)


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("D010|Name without double bar", "missing '||'"),
        ("D010||Name||Other", "empty name at position 2"),
        ("D010||Name|", "empty name at position 2"),
        ("D010|||Name", "empty name at position 1"),
        ("|D010||Name", "empty id"),
        ("XYZ||Name", "malformed id 'XYZ'"),
        ("D001||Again", "concept id D001 already defined on line 1"),
    ],
)
def test_load_medic_bad_line(tmp_path: Path, bad: str, reason: str) -> None:
    path = write(tmp_path / "medic.txt", MEDIC + bad + "\n")
    with pytest.raises(DataFormatError) as exc:
        load_medic(path)
    assert "medic.txt:8:" in str(exc.value)
    assert reason in str(exc.value)


def test_load_ncbi_disease(root: Path) -> None:
    ds = load_ncbi_disease("devel", root)
    assert ds.name == "ncbi-disease/devel"
    assert len(ds.vocabulary) == 7
    q = {x.id: x for x in ds.queries}
    one = TEXT1.index("Disease one")
    assert f"111:{one}-{one + 11}" in q
    qrels = {x.id: dict(ds.qrels[x.id]) for x in ds.queries}
    # OMIM id listed on its own line and as alt id of D002: both concepts are relevant.
    two = TEXT1.index("disease two")
    assert qrels[f"111:{two}-{two + 11}"] == {"OMIM:100100": 1, "D002": 1}
    # Composite '|' ids -> set of concepts.
    comp = TEXT1.index("disease two or three")
    assert qrels[f"111:{comp}-{comp + 20}"] == {"D002": 1, "C003": 1}
    assert q[f"111:{comp}-{comp + 20}"].meta["class"] == "CompositeMention"
    # Bare OMIM number in the corpus -> OMIM: prefix.
    om = TEXT1.index("omim only disease")
    assert qrels[f"111:{om}-{om + 17}"] == {"OMIM:200200": 1}
    assert q[f"111:{om}-{om + 17}"].meta["ids"] == ("OMIM:200200",)
    # '+' ids -> set of concepts.
    four = "Short title Four and one.".index("Four and one")
    assert qrels[f"222:{four}-{four + 12}"] == {"D004": 1, "D001": 1}
    # alt id D005 resolves to D004; mismatching offsets are kept but flagged.
    assert qrels["222:0-5"] == {"D004": 1}
    assert q["222:0-5"].meta["offset_ok"] is False
    assert q["222:0-5"].meta["raw_ids"] == "D005"
    # D999 is not in MEDIC: dropped and counted; the duplicate document 222 is skipped.
    assert ds.unmapped == 1
    assert len(ds.queries) == 6
    assert all(q.meta["pmid"] in {"111", "222"} for q in ds.queries)


def test_load_ncbi_disease_by_path_and_vocabulary(root: Path) -> None:
    other = write(root / "x" / "test_corpus.txt", PUBTATOR)
    vocab = (Concept("D001", "Disease One"),)
    ds = load_ncbi_disease(path=other, vocabulary=vocab)
    assert ds.name == "ncbi-disease/test_corpus"
    assert {dict(ds.qrels[q.id]).popitem()[0] for q in ds.queries} == {"D001"}
    assert len(ds.queries) == 2  # "Disease one" and "Four and one" (D004+D001)
    with pytest.raises(ValueError, match="unknown NCBI disease split"):
        load_ncbi_disease("test", root)


def test_colliding_query_ids_get_a_suffix(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.txt",
        "1|t|Disease one\n1|a|x\n1\t0\t7\tDisease\tSpecificDisease\tD001\n1\t0\t7\tDisease\tDiseaseClass\tD001\n",
    )
    ds = load_ncbi_disease(path=path, vocabulary=(Concept("D001", "Disease One"),))
    assert [q.id for q in ds.queries] == ["1:0-7", "1:0-7#2"]


# ---------------------------------------------------------------- BC5CDR


def test_load_bc5cdr_diseases(root: Path) -> None:
    ds = load_bc5cdr(root)
    assert ds.name == "bc5cdr/train"
    assert [q.text for q in ds.queries] == ["disease one and disease two"]
    q = ds.queries[0]
    assert dict(ds.qrels[q.id]) == {"D001": 1, "D002": 1}
    assert q.meta["individual_mentions"] == ("disease one", "disease two")
    assert ds.unmapped == 2  # "fever" (-1) and D066126 (not in MEDIC)


def test_load_bc5cdr_chemicals_need_a_vocabulary(root: Path) -> None:
    with pytest.raises(ValueError, match="pass vocabulary"):
        load_bc5cdr(root, entity_type="Chemical")
    with pytest.raises(ValueError, match="unknown BC5CDR entity type"):
        load_bc5cdr(root, entity_type="Gene")
    ds = load_bc5cdr(root, entity_type="Chemical", vocabulary=(Concept("D777", "Drug X"),))
    assert ds.name == "bc5cdr/train-chemical"
    assert [q.text for q in ds.queries] == ["Drug X"] and ds.unmapped == 1


def test_registry(root: Path) -> None:
    assert set(LOADERS) == {"chip-cdn", "ncbi-disease", "bc5cdr"}
    assert LOADERS["chip-cdn"](root).name == "chip-cdn/train"
    assert LOADERS["ncbi-disease"](root).name == "ncbi-disease/devel"
    assert LOADERS["bc5cdr"](root).name == "bc5cdr/train"


# ---------------------------------------------------------------- splits


def test_split_is_deterministic_and_disjoint(root: Path) -> None:
    ds = load_ncbi_disease("devel", root)
    a_train, a_valid = split_queries(ds, valid_fraction=0.5, seed=3)
    b_train, b_valid = split_queries(ds, valid_fraction=0.5, seed=3)
    assert [q.id for q in a_valid.queries] == [q.id for q in b_valid.queries]
    assert [q.id for q in a_train.queries] == [q.id for q in b_train.queries]
    ids_t, ids_v = {q.id for q in a_train.queries}, {q.id for q in a_valid.queries}
    assert not ids_t & ids_v and ids_t | ids_v == {q.id for q in ds.queries}
    assert len(ids_v) == 3
    assert set(a_valid.qrels) == ids_v and a_valid.vocabulary == ds.vocabulary
    # Query order inside each side follows the dataset.
    order = [q.id for q in ds.queries]
    assert [q.id for q in a_train.queries] == [i for i in order if i in ids_t]
    # Input order does not matter: the permutation is over sorted keys.
    shuffled = dataclasses.replace(ds, queries=tuple(reversed(ds.queries)))
    assert {q.id for q in split_queries(shuffled, 0.5, 3)[1].queries} == ids_v
    with pytest.raises(ValueError, match="valid_fraction"):
        split_queries(ds, valid_fraction=1.0)


def test_split_chip_cdn_groups_identical_texts(root: Path) -> None:
    ds = load_chip_cdn(root)
    for seed in range(20):
        train, valid = split_queries(ds, valid_fraction=0.3, seed=seed)
        assert not {q.text for q in train.queries} & {q.text for q in valid.queries}
        assert len(train.queries) + len(valid.queries) == len(ds.queries)
        assert train.unmapped + valid.unmapped == ds.unmapped


def test_split_by_meta_key(root: Path) -> None:
    ds = load_ncbi_disease("devel", root)
    train, valid = split_queries(ds, valid_fraction=0.5, seed=0, group_by="pmid")
    assert not {q.meta["pmid"] for q in train.queries} & {q.meta["pmid"] for q in valid.queries}


def test_subset(root: Path) -> None:
    ds = load_chip_cdn(root)
    sub = subset(ds, ["train:5", "train:1"])
    assert [q.id for q in sub.queries] == ["train:1", "train:5"]
    assert set(sub.qrels) == {"train:1", "train:5"} and sub.unmapped == 1
    with pytest.raises(KeyError):
        subset(ds, ["nope"])


# ---------------------------------------------------------------- real data

REAL = data_root()
needs_data = pytest.mark.skipif(
    not (REAL / "chip-cdn").is_dir()
    or not (REAL / "ncbi-disease").is_dir()
    or not (REAL / "bc5cdr").is_dir(),
    reason=f"real datasets not found under {REAL} (set MEDRANK_DATA to the shared data root)",
)


@pytest.mark.slow
@needs_data
def test_real_chip_cdn_counts() -> None:
    vocab = load_chip_cdn_vocabulary()
    assert len(vocab) == 37_645
    assert sum(len(c.meta["codes"]) for c in vocab) == 40_474
    assert len({code for c in vocab for code in c.meta["codes"]}) == 40_474
    ds = load_chip_cdn()
    assert len(ds.queries) == 6_000
    raw = [
        json.loads(line)["normalized_result"]
        for line in open(REAL / "chip-cdn" / "train.jsonl", encoding="utf-8")
    ]
    raw_per_record = Counter(len(r.split("##")) for r in raw)
    assert raw_per_record[1] == 2_736 and raw_per_record[2] == 2_372 and raw_per_record[13] == 1
    assert len({n for r in raw for n in r.split("##")}) == 3_503  # README: distinct names as written
    terms = gold_terms(ds)
    assert len(terms) == 3_475  # after removing the CSV quotes (and whitespace)
    known = {c.id for c in vocab}
    assert sum(1 for t in terms if t not in known) == 199
    assert ds.unmapped == 529
    assert sum("O" in ds.qrels[q.id] for q in ds.queries) == 31
    train, valid = split_queries(ds)
    assert (len(train.queries), len(valid.queries)) == (4_800, 1_200)


@pytest.mark.slow
@needs_data
def test_real_ncbi_disease_counts() -> None:
    folder = REAL / "ncbi-disease"
    medic = load_medic(folder / "medic_06Jul2012.txt")
    assert len(medic) == 11_915
    devel_docs = parse_pubtator(folder / "NCBIdevelopset_corpus.txt")
    assert len(devel_docs) == 100
    anns = [a for d in devel_docs for a in d.annotations]
    assert len(anns) == 787
    assert Counter(a.type for a in anns) == {
        "SpecificDisease": 412,
        "Modifier": 214,
        "DiseaseClass": 126,
        "CompositeMention": 35,
    }
    devel = load_ncbi_disease("devel")
    assert len(devel.queries) + devel.unmapped == 787
    assert devel.unmapped == 0
    train_docs = parse_pubtator(folder / "NCBItrainset_corpus.txt")
    assert len(train_docs) == 593 and len({d.pmid for d in train_docs}) == 592
    assert sum(len(d.annotations) for d in train_docs) == 5_145
    assert count_offset_mismatches(train_docs) == 1
    train = load_ncbi_disease("train")
    assert len(train.queries) + train.unmapped == 5_145 - 11  # duplicate PMID 8528200 (11 mentions) skipped


@pytest.mark.slow
@needs_data
def test_real_bc5cdr_counts() -> None:
    docs = parse_pubtator(REAL / "bc5cdr" / "CDR_TrainingSet.PubTator.txt")
    assert len(docs) == 500
    assert Counter(a.type for d in docs for a in d.annotations) == {"Chemical": 5_203, "Disease": 4_182}
    assert sum(len(d.relations) for d in docs) == 1_038
    ds = load_bc5cdr()
    assert len(ds.queries) + ds.unmapped == 4_182
    assert ds.unmapped == 51  # 32 with id -1, 19 with D066126 (not in MEDIC 2012)
