"""MedQuAD loader: XML schemas, documents/passages, (entity, aspect) queries, splits and the JSONL format."""

from __future__ import annotations

from pathlib import Path

import pytest

from medrank.data.errors import DataFormatError
from medrank.data.medquad import (
    build_queries,
    corpus_from_documents,
    entity_groups,
    load_medquad,
    load_medquad_documents,
    load_medquad_jsonl,
    load_passage_corpus,
    read_medquad_xml,
    save_medquad_jsonl,
    split_documents,
)

DOC = """<?xml version="1.0" encoding="UTF-8"?>
<Document id="{id}" source="{source}" url="https://example.org/{id}">
<Focus>{focus}</Focus>
<FocusAnnotations>
  <UMLS><CUIs>{cuis}</CUIs><SemanticTypes><SemanticType>T047</SemanticType></SemanticTypes>
  <SemanticGroup>Disorders</SemanticGroup></UMLS>
  <Synonyms><Synonym>{focus} disorder</Synonym></Synonyms>
</FocusAnnotations>
<QAPairs>{pairs}</QAPairs>
</Document>
"""
PAIR = '<QAPair pid="{n}"><Question qid="{id}-{n}" qtype="{qtype}">Q {n}?</Question><Answer>{answer}</Answer></QAPair>'


def write_doc(folder: Path, doc_id: str, focus: str, qas: list[tuple[str, str]], source: str = "GARD",
              cuis: tuple[str, ...] = (), name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pairs = "".join(PAIR.format(n=i + 1, id=doc_id, qtype=q, answer=a) for i, (q, a) in enumerate(qas))
    cui_xml = "".join(f"<CUI>{c}</CUI>" for c in cuis)
    path = folder / f"{name or doc_id}.xml"
    path.write_text(DOC.format(id=doc_id, source=source, focus=focus, cuis=cui_xml, pairs=pairs), encoding="utf-8")
    return path


def make_medquad_root(tmp_path: Path) -> Path:
    """A data root with a tiny MedQuAD folder: 3 multi-answer documents, a single-answer one, an empty one."""
    root = tmp_path / "data"
    gard = root / "medquad" / "2_GARD_QA"
    ghr = root / "medquad" / "3_GHR_QA"
    write_doc(gard, "0000001", "IgA nephropathy", [
        ("information", "IgA nephropathy is a kidney disease. It damages the filters of the kidney."),
        ("symptoms", "Blood in the urine is common. Swelling of the legs may occur."),
        ("treatment", "Treatment aims to slow the disease. Blood pressure drugs help."),
    ], cuis=("C0017658",))
    write_doc(ghr, "0000002", "Berger disease", [  # same CUI as above: one entity
        ("symptoms", "Episodes of visible blood in the urine follow infections."),
        ("treatment", "These resources address the diagnosis or management of the condition."),
    ], source="GHR", cuis=("C0017658",))
    write_doc(gard, "0000003", "Asthma", [
        ("information", "Asthma is a chronic disease of the airways."),
        ("symptoms", "Wheezing - Cough - Chest tightness"),
    ], cuis=("C0004096",))
    write_doc(gard, "0000004", "Single answer", [("information", "Only one passage here.")])
    write_doc(gard, "0000005", "Empty answers", [("information", ""), ("symptoms", "  ")])
    return root


@pytest.fixture
def medquad_root(tmp_path: Path) -> Path:
    return make_medquad_root(tmp_path)


def test_read_xml_documents_and_passages(medquad_root: Path) -> None:
    docs = load_medquad_documents(medquad_root)
    assert [d.id for d in docs] == ["GARD_0000001", "GARD_0000003", "GHR_0000002"]  # folder order, singles skipped
    d = docs[0]
    assert d.title == "IgA nephropathy"
    assert [p.id for p in d.passages] == ["GARD_0000001-1", "GARD_0000001-2", "GARD_0000001-3"]
    assert [p.label for p in d.passages] == ["information", "symptoms", "treatment"]
    assert d.meta["entity_ids"] == ("C0017658",) and d.meta["synonyms"] == ("IgA nephropathy disorder",)
    assert d.text.startswith("IgA nephropathy is a kidney disease.")
    # GHR treatment answers are generic links: kept as passages, never an answer
    ghr = docs[2]
    assert [p.meta["queryable"] for p in ghr.passages] == [True, False]
    assert len(load_medquad_documents(medquad_root, min_passages=1)) == 4


def test_other_schemas_and_duplicate_ids(tmp_path: Path) -> None:
    ninds = tmp_path / "6_NINDS_QA"
    ninds.mkdir()
    (ninds / "0000007.xml").write_text(
        '<?xml version="1.0"?><doc docid="0000007" corpus="NINDS"><doctitle-focus>Holmes-Adie</doctitle-focus>'
        '<qaPairs><pair pid="1"><question qid="0000007-1" qtype="information">what?</question>'
        "<answer>A pupil disorder.</answer></pair><pair pid=\"2\"><question qid=\"0000007-2\" qtype=\"treatment\">how?"
        "</question><answer>Glasses help.</answer></pair></qaPairs></doc>",
        encoding="utf-8",
    )
    doc = read_medquad_xml(ninds / "0000007.xml")
    assert doc is not None and doc.id == "NINDS_0000007" and doc.title == "Holmes-Adie"
    assert [p.label for p in doc.passages] == ["information", "treatment"]
    # a file whose id repeats a sibling's gets the file name as id
    cg = tmp_path / "1_CancerGov_QA"
    write_doc(cg, "0000013_2", "Cancer", [("information", "A."), ("treatment", "B.")], source="CancerGov")
    write_doc(cg, "0000013_2", "Cancer", [("information", "C."), ("stages", "D.")], source="CancerGov", name="0000013_2_1")
    docs = load_medquad_documents(path=cg)
    assert [d.id for d in docs] == ["CancerGov_0000013_2", "CancerGov_0000013_2_1"]
    assert docs[1].passages[0].id == "CancerGov_0000013_2_1-1"
    bad = tmp_path / "bad.xml"
    bad.write_text("<Document id='1' source='X'><Focus>x</Focus>", encoding="utf-8")
    with pytest.raises(DataFormatError, match="bad.xml"):
        read_medquad_xml(bad)


def test_queries_merge_entities_and_judge_passages(medquad_root: Path) -> None:
    docs = load_medquad_documents(medquad_root)
    assert entity_groups(docs) == [0, 1, 0]  # IgA nephropathy and Berger disease share their CUI
    queries, qrels = build_queries(docs)
    by_id = {q.id: q for q in queries}
    sym = by_id["iga-nephropathy::symptoms"]
    assert sym.meta["entity"] == "IgA nephropathy" and sym.meta["aspect"] == "symptoms"
    assert qrels.relevant(sym.id) == {"GARD_0000001-2", "GHR_0000002-1"}
    assert qrels.relevant("iga-nephropathy::treatment") == {"GARD_0000001-3"}  # not the generic GHR one
    assert len(queries) == 5


def test_split_is_by_document_and_deterministic(medquad_root: Path) -> None:
    docs = load_medquad_documents(medquad_root)
    a = split_documents(docs, 0.34, seed=3)
    b = split_documents(docs, 0.34, seed=3)
    assert [d.id for d in a[1]] == [d.id for d in b[1]] and len(a[1]) == 1
    assert {d.id for d in a[0]} | {d.id for d in a[1]} == {d.id for d in docs}
    valid = load_medquad("valid", medquad_root, valid_fraction=0.34, seed=3)
    assert [d.id for d in valid.documents] == [d.id for d in a[1]]
    with pytest.raises(ValueError, match="split"):
        load_medquad("test", medquad_root)


def test_jsonl_round_trip_and_errors(medquad_root: Path, tmp_path: Path) -> None:
    corpus = corpus_from_documents(load_medquad_documents(medquad_root))
    path = tmp_path / "docs.jsonl"
    save_medquad_jsonl(corpus, path)
    back = load_medquad_jsonl(path)
    assert [d.id for d in back.documents] == [d.id for d in corpus.documents]
    assert [p.text for p in back.passages] == [p.text for p in corpus.passages]
    assert back.qrels.to_dict() == corpus.qrels.to_dict()
    # without query lines the queries are derived from the documents
    save_medquad_jsonl(corpus, tmp_path / "docs_only.jsonl", with_queries=False)
    derived = load_passage_corpus(tmp_path / "docs_only.jsonl")
    assert derived.qrels.to_dict() == corpus.qrels.to_dict()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text().splitlines()[0] + "\n{\"type\": \"query\", \"entity\": \"x\", \"aspect\": \"y\", "
                   "\"relevant\": [\"nope\"]}\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad.jsonl:2"):
        load_medquad_jsonl(bad)


@pytest.mark.slow
def test_real_medquad_counts(real_data: Path) -> None:
    docs = load_medquad_documents(real_data)
    assert len(docs) == 2242
    corpus = corpus_from_documents(docs)
    assert corpus.describe()["passages"] == 10466
    _, valid = split_documents(docs, 0.2, 13)
    assert len(valid) == 448


def test_medquad_answers_for_the_similar_question_service(tmp_path):
    from medrank.pipelines.similar.corpus import load_medquad_answers, load_medquad_questions, shorten

    root = make_medquad_root(tmp_path)
    answers = load_medquad_answers(root)
    assert set(answers) <= set(load_medquad_questions(root))  # keyed exactly as the corpus cleans questions
    # "Q 1?" is asked in several files: the first file (sorted) with an answer gives it
    assert answers["Q 1?"] == {"answer": "IgA nephropathy is a kidney disease. It damages the filters of the kidney.",
                               "url": "https://example.org/0000001"}
    assert load_medquad_answers(root, max_chars=20)["Q 1?"]["answer"] == "IgA nephropathy is…"
    assert shorten("short", 20) == "short" and shorten("a" * 30, 10) == "a" * 9 + "…"
    # a page without <Focus> keeps its own questions but not its template questions with an empty topic slot
    (root / "medquad" / "9_CDC_QA").mkdir()
    (root / "medquad" / "9_CDC_QA" / "0000009.xml").write_text(
        '<Document id="0000009" source="CDC" url="https://example.org/9"><Focus></Focus><QAPairs>'
        '<QAPair pid="1"><Question qid="0000009-1" qtype="information">What is (are)  ?</Question><Answer>Vaccines.</Answer></QAPair>'
        '<QAPair pid="2"><Question qid="0000009-2" qtype="information">what is vrsa?</Question><Answer>A germ.</Answer></QAPair>'
        "</QAPairs></Document>", encoding="utf-8")
    answers = load_medquad_answers(root)
    assert answers["what is vrsa?"]["answer"] == "A germ." and not any(q.startswith("What is (are)") for q in answers)


def test_answers_keep_non_ascii_letters_and_the_spaces_between_text_nodes(tmp_path: Path) -> None:
    from medrank.data.medquad import read_medquad_xml

    xml = """<?xml version="1.0" encoding="UTF-8"?>
<Document id="0000001" source="NHLBI" url="https://example.org/vv">
<Focus>Varicose Veins</Focus>
<QAPairs>
<QAPair pid="1"><Question qid="0000001-1" qtype="information">What are varicose veins?</Question>
<Answer>Español<p>Varicose veins are swollen veins.</p><p>They are treated with medications<b>pills</b>that help.</p>
Line one
line two.</Answer></QAPair>
</QAPairs>
</Document>"""
    path = tmp_path / "0000001.xml"
    path.write_text(xml, encoding="utf-8")
    doc = read_medquad_xml(path)
    text = doc.passages[0].text
    assert text.startswith("Español Varicose veins are swollen veins. They are")
    assert "medications pills that help." in text and "Line one line two." in text
