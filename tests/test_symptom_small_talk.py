"""Small talk names no finding (medrank.pipelines.symptom.small_talk): the turns read from MTS-Dialog, the wording
filter, the gate's margins on a table encoder, and what the set detector keeps. What the gate does on real patient
turns and complaints is measured by bench/small_talk.py."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from medrank.config import DataNotFoundError
from medrank.index.dense import DenseIndex
from medrank.pipelines.symptom.sets import BASE_FEATURES, SetCalibration, SetDetector
from medrank.pipelines.symptom.small_talk import (
    SmallTalkGate,
    dense_view,
    like,
    small_talk_turns,
    without_wordings,
)
from medrank.records import Concept
from medrank.retrieval.concept import ConceptRetriever


class TableEncoder:
    """Fixed unit vectors per text (axes: 0 headache, 1 fever, 2 thanks, 3 yes/ok, 4 age); others get axis 7."""

    name = "table"
    dim = 8
    TABLE = {
        "Headache": [1, 0, 0, 0, 0], "head pain": [1, 0, 0, 0, 0], "Fever": [0, 1, 0, 0, 0],
        "Thank you.": [0, 0, 1, 0, 0], "Thanks, doctor.": [0, 0, 0.95, 0.05, 0], "Yes.": [0, 0, 0, 1, 0],
        "Okay.": [0, 0, 0, 0.97, 0.03], "I'm forty one.": [0, 0, 0, 0, 1], "I am fifty.": [0, 0, 0, 0.05, 0.95],
        # a turn that states a finding in words the vocabulary lacks: nearer to Headache than to any other turn
        "My head aches.": [0.9, 0, 0, 0.1, 0],
        "thank you": [0, 0, 1, 0, 0], "ok": [0, 0.1, 0, 0.9, 0], "I have a headache": [0.95, 0, 0.05, 0, 0],
        "my head is pounding": [0.9, 0.1, 0, 0, 0], "a headache": [0.95, 0, 0.05, 0, 0], "headache": [1, 0, 0, 0, 0],
    }

    def encode(self, texts, kind="query", show_progress=False, **_):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            v = self.TABLE.get(t)
            if v is None:
                out[i, 7] = 1.0
            else:
                out[i, : len(v)] = v
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def spec(self):
        return None


TERMS = [Concept("HP:1", "Headache", ("head pain",)), Concept("HP:2", "Fever")]
TURNS = ["Thank you.", "Thanks, doctor.", "Yes.", "Okay.", "I'm forty one.", "I am fifty.", "My head aches."]


def _write_mts(root, rows: Sequence[str]) -> None:
    folder = root / "mts-dialog" / "Main-Dataset"
    folder.mkdir(parents=True)
    body = "".join(f'{i},GENHX,text,"{r}"\n' for i, r in enumerate(rows))
    (folder / "MTS-Dialog-TrainingSet.csv").write_text("ID,section_header,section_text,dialogue\n" + body, encoding="utf-8")


def test_turns_are_short_patient_and_family_turns_once_each(tmp_path) -> None:
    _write_mts(tmp_path, ["Doctor: How are you?\nPatient: Good, thank you.\nDoctor: Any pain?\nPatient: No.",
                          "Guest_family: Yes, she is.\nPatient: I have had a bad cough for two weeks now.\nPatient: No."])
    assert small_talk_turns(tmp_path) == ["Good, thank you.", "No.", "Yes, she is."]
    assert small_talk_turns(tmp_path, max_words=10) == ["Good, thank you.", "No.", "Yes, she is.",
                                                       "I have had a bad cough for two weeks now."]
    with pytest.raises(ValueError, match="max_words"):
        small_talk_turns(tmp_path, max_words=0)
    with pytest.raises(DataNotFoundError):
        small_talk_turns(tmp_path / "elsewhere")


def test_a_turn_holding_a_wording_is_not_small_talk() -> None:
    wordings = ["Fever", "Headache", "Pain", "ok"]  # "ok" is too short to take a turn out
    assert without_wordings(["No fever.", "Okay.", "ok then", "A headache!", "Pain, yes."], wordings) == [
        "Okay.", "ok then"]


def test_a_turn_holding_a_short_wordings_stems_is_not_small_talk() -> None:
    # "I feel depressed." held no wording as whole words; it and "I'm sad and depressed." were each other's nearest
    # turn, so both stayed small talk and the gate took "I feel depressed" from every complaint
    wordings = ["Depression", "Pain", "Poor sleep", "Abnormality of the nervous system"]
    turns = ["I feel depressed.", "Painful?", "I sleep poorly.", "Thank you.", "My nerves, doctor.", "Systems are fine."]
    assert without_wordings(turns, wordings) == ["Thank you.", "My nerves, doctor.", "Systems are fine."]


def test_the_gate_keeps_turns_nearer_to_each_other_than_to_a_term() -> None:
    retriever = ConceptRetriever.build(TERMS, method="dense", encoder=TableEncoder())
    gate = SmallTalkGate.build(retriever.index, TURNS, ["Headache", "head pain", "Fever"])
    assert gate is not None
    assert "My head aches." not in gate.turns and "Thank you." in gate.turns  # a finding in other words is left out
    m = gate.margins(["thank you", "ok", "I have a headache", "my head is pounding"])
    # thank you: term 0 against the turn "Thank you." 1; I have a headache: .95 / sqrt(.95^2 + .05^2) against .05-ish
    assert m[0] == pytest.approx(-1.0, abs=1e-5)
    assert m[1] < 0 < m[2] and m[3] > 0
    assert gate.small_talk(["thank you", "I have a headache"]) == [True, False]


def test_dense_view_and_like_copy_an_ensemble_and_take_the_dense_part_of_a_hybrid() -> None:
    enc = TableEncoder()
    dense = ConceptRetriever.build(TERMS, method="dense", encoder=enc).index
    assert dense_view(dense) is dense
    hybrid = ConceptRetriever.build(TERMS, method="hybrid", encoder=enc, language="en").index
    assert isinstance(dense_view(hybrid), DenseIndex)
    assert dense_view(ConceptRetriever.build(TERMS, method="bm25", language="en").index) is None
    mean = ConceptRetriever.mean_of([ConceptRetriever.build(TERMS, method="dense", encoder=enc)] * 2).index
    assert dense_view(mean) is mean
    copied = like(mean, ["Yes.", "Thank you."])
    assert copied.method == "mean" and copied.entry_texts == ["Yes.", "Thank you."]
    assert copied.search(["thank you"], k=1)[0].ids == ("small-talk:1",)
    with pytest.raises(TypeError, match="no dense structure"):
        like(ConceptRetriever.build(TERMS, method="bm25", language="en").index, ["Yes."])


def _detector() -> SetDetector:
    """An English detector whose calibration decides the top term of every piece."""
    retriever = ConceptRetriever.build(TERMS, method="dense", encoder=TableEncoder())
    n = len(BASE_FEATURES)
    coef = [4.0 if f == "span_top1" else 0.0 for f in BASE_FEATURES]
    cal = SetCalibration([0.0] * n, [1.0] * n, coef, -2.0, threshold=0.5, min_terms=1)
    return SetDetector.from_retriever(retriever, calibration=cal, language="en")


def test_the_detector_decides_nothing_on_small_talk_and_keeps_complaints(tmp_path) -> None:
    det = _detector()
    assert [t.name for t in det.detect("thank you").terms]  # the calibration reads every text as a complaint
    assert [t.name for t in det.detect("I have a headache, ok").terms] == ["Headache", "Fever"]  # Fever on "ok"
    retriever_index = det.small_talk  # none yet
    assert retriever_index is None
    _write_mts(tmp_path, ["\n".join(f"Patient: {t}" for t in TURNS)])
    assert det.use_small_talk(ConceptRetriever.build(TERMS, method="dense", encoder=TableEncoder()).index, TERMS,
                              tmp_path)
    talk = det.detect("thank you")
    assert talk.terms == [] and talk.alternatives == []
    assert [t.name for t in det.detect("I have a headache").terms] == ["Headache"]
    # a complaint with small talk in it: the complaint's term stays, nothing is decided or offered on the small talk
    mixed = det.detect("I have a headache, ok")
    assert [t.name for t in mixed.terms] == ["Headache"]
    assert all("ok" not in "I have a headache, ok"[slice(*t.span)] for t in mixed.terms + mixed.alternatives)
    # one call for several texts: each text's own spans are gated
    assert [[t.name for t in s.terms] for s in det.detect_many(["ok", "I have a headache", "thank you"])] == [
        [], ["Headache"], []]


def test_the_gate_is_off_for_chinese_and_without_the_data(tmp_path) -> None:
    det = _detector()
    index = ConceptRetriever.build(TERMS, method="dense", encoder=TableEncoder()).index
    assert not det.use_small_talk(index, TERMS, tmp_path / "no-data")  # logged, served without the gate
    assert det.small_talk is None
    zh = SetDetector(lambda texts, k: [[] for _ in texts], {}, language="zh")
    assert not zh.use_small_talk(index, TERMS, tmp_path)


def test_a_store_gate_from_an_encoder_and_a_score_function(tmp_path) -> None:
    enc = TableEncoder()
    dense = ConceptRetriever.build(TERMS, method="dense", encoder=enc).index

    def term_scores(texts):
        return np.array([r.scores[0] for r in dense.search(list(texts), k=1)])

    gate = SmallTalkGate.for_encoder(term_scores, enc, TURNS, ["Headache", "head pain", "Fever"])
    assert gate is not None and gate.small_talk(["thank you", "I have a headache"]) == [True, False]


def test_subset_keeps_the_vectors_of_the_entries_it_keeps() -> None:
    from medrank.pipelines.symptom.small_talk import subset

    enc = TableEncoder()
    mean = ConceptRetriever.mean_of([ConceptRetriever.build(TERMS, method="dense", encoder=enc)] * 2).index
    every = like(mean, ["Yes.", "Thank you.", "I'm forty one."])
    cut = subset(every, [1, 2])
    assert cut.entry_texts == ["Thank you.", "I'm forty one."] and cut.method == "mean"
    hit = cut.search(["thank you"], k=1)[0]
    assert hit.ids == ("small-talk:0",) and hit.scores[0] == pytest.approx(1.0, abs=1e-5)
