"""The ensemble of trained English runs (medrank.pipelines.symptom.ensemble): settings, the mean of two retrievers,
and the errors a user meets. The ensemble over real trained runs is measured by bench/symptom_sets.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from medrank.pipelines.symptom.ensemble import EnsembleSettings, build_ensemble_run
from medrank.records import Concept
from medrank.retrieval.concept import ConceptRetriever

TERMS = [
    Concept("HP:1", "Headache", ("head pain",)),
    Concept("HP:2", "Fever", ("high temperature",)),
    Concept("HP:3", "Cough"),
    Concept("HP:4", "Abdominal pain", ("stomach ache",)),
]


class ScaledEncoder:
    """The tiny encoder with its vectors rotated: a second member that scores the same texts differently."""

    def __init__(self, inner, seed: int) -> None:
        self.inner = inner
        rng = np.random.default_rng(seed)
        q, _ = np.linalg.qr(rng.normal(size=(inner.dim, inner.dim)))
        self.rotation = q.astype(np.float32)
        self.dim = inner.dim
        self.name = f"{inner.name}-rot{seed}"

    def encode(self, texts, *args, **kwargs):
        v = np.asarray(self.inner.encode(texts, *args, **kwargs), dtype=np.float32)
        # a rotation keeps unit length, so the scores stay cosines
        return v @ self.rotation

    def spec(self):
        return None

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_settings_need_two_distinct_members_and_sane_weights():
    with pytest.raises(ValueError, match="two or more member runs"):
        EnsembleSettings.from_dict({"members": ["runs/a"]})
    with pytest.raises(ValueError, match="two or more member runs"):
        EnsembleSettings.from_dict({"members": "runs/a"})
    with pytest.raises(ValueError, match="different runs"):
        EnsembleSettings.from_dict({"members": ["runs/a", "runs/a"]})
    with pytest.raises(ValueError, match="one positive number per member"):
        EnsembleSettings.from_dict({"members": ["runs/a", "runs/b"], "weights": [1.0]})
    with pytest.raises(ValueError, match="one positive number per member"):
        EnsembleSettings.from_dict({"members": ["runs/a", "runs/b"], "weights": [1.0, -1.0]})
    with pytest.raises(ValueError, match="unknown symptom-ensemble settings"):
        EnsembleSettings.from_dict({"members": ["runs/a", "runs/b"], "epochs": 3})
    s = EnsembleSettings.from_dict({"members": ["runs/a", "runs/b"]})
    assert s.member_weights == [1.0, 1.0]


def test_mean_of_two_retrievers_averages_their_cosines(tiny_encoder):
    one = ConceptRetriever.build(TERMS, method="dense", encoder=tiny_encoder)
    two = ConceptRetriever.build(TERMS, method="dense", encoder=ScaledEncoder(tiny_encoder, 3))
    ensemble = ConceptRetriever.mean_of([one, two], [1.0, 3.0], depth=len(TERMS))
    query = "pain in my head"
    a = dict(zip(*(lambda r: (r.ids, r.scores))(one.search(query, k=len(TERMS))[0]), strict=True))
    b = dict(zip(*(lambda r: (r.ids, r.scores))(two.search(query, k=len(TERMS))[0]), strict=True))
    got = ensemble.search(query, k=len(TERMS))[0]
    expected = {cid: (a[cid] + 3 * b[cid]) / 4 for cid in a}
    assert dict(zip(got.ids, got.scores, strict=True)) == pytest.approx(expected)
    assert list(got.ids) == sorted(expected, key=lambda c: -expected[c])
    assert set(ensemble.concepts) == {c.id for c in TERMS}


def test_build_says_which_member_is_unfinished(tmp_path):
    done = tmp_path / "a"
    done.mkdir()
    with pytest.raises(FileNotFoundError, match="not a finished hpo-layperson run .*config.json"):
        build_ensemble_run({"members": [str(done), str(tmp_path / "b")]}, tmp_path / "out")
    with pytest.raises(ValueError, match="needs output_dir"):
        build_ensemble_run({"members": [str(done), str(tmp_path / "b")]})
    with pytest.raises(ValueError, match="is one of the members"):
        build_ensemble_run({"members": [str(done), str(tmp_path / "b")]}, done)


def test_build_refuses_a_run_of_another_dataset(tmp_path):
    runs = []
    for name, dataset in (("a", "hpo-layperson"), ("b", "chip-cdn")):
        run = tmp_path / name
        for sub in ("model", "index-vocab", "index-hpo"):
            (run / sub).mkdir(parents=True)
        (run / "detector.json").write_text("{}", encoding="utf-8")
        (run / "config.json").write_text(json.dumps({"task": "symptom", "name": name, "dataset": dataset}),
                                         encoding="utf-8")
        runs.append(str(run))
    with pytest.raises(ValueError, match="averages hpo-layperson runs"):
        build_ensemble_run({"members": runs}, tmp_path / "out")


def _member_run(tmp_path, name: str, seed: int, tiny_encoder, prompts: dict | None = None):
    """A run folder as far as serving reads it: ``model/`` (the tiny encoder, perturbed by ``seed``) and ``index-hpo``;
    ``prompts`` (``query_prompt`` / ``passage_prompt``) make it a member that prefixes its texts, as e5-small does."""
    import copy

    import torch

    from medrank.encoders import load_encoder

    run = tmp_path / name
    tiny_encoder = copy.deepcopy(tiny_encoder)  # the fixture is shared by the session: perturb a copy
    with torch.no_grad():
        for p in tiny_encoder.model.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(seed)) * 0.05)
    tiny_encoder.save(run / "model")
    enc = load_encoder({**tiny_encoder.spec(), "path": str(run / "model"), **(prompts or {})})
    ConceptRetriever.build(TERMS, method="dense", encoder=enc).save(run / "index-hpo")
    return run, enc


@pytest.mark.parametrize("prompts", [None, {"query_prompt": "query: ", "passage_prompt": "passage: "}],
                         ids=["same-kind", "second-member-with-prompts"])
def test_an_ensemble_run_serves_the_mean_of_its_members_from_their_own_folders(tiny_encoder, tmp_path, prompts):
    from medrank.pipelines.symptom.artefacts import ensemble_members, open_run_index

    (a, enc_a), (b, enc_b) = (_member_run(tmp_path, "a", 1, tiny_encoder),
                              _member_run(tmp_path, "b", 2, tiny_encoder, prompts))
    ens = tmp_path / "ensemble"
    parts = [ConceptRetriever.load(a / "index-hpo", encoder=enc_a), ConceptRetriever.load(b / "index-hpo", encoder=enc_b)]
    ConceptRetriever.mean_of(parts, [1.0, 1.0], depth=len(TERMS)).save(ens / "index-hpo")
    (ens / "detector.json").write_text(json.dumps({"candidates": {"hpo": "index-hpo"}, "members": ["../a", "../b"]}),
                                       encoding="utf-8")
    assert [p.name for p in ensemble_members(ens)] == ["a", "b"]
    query = "high temperature and head pain"
    expected = {}
    for r in parts:
        row = r.search(query, k=len(TERMS))[0]
        for cid, score in zip(row.ids, row.scores, strict=True):
            expected[cid] = expected.get(cid, 0.0) + score / 2
    # moved together, the members are still found beside the ensemble
    moved = tmp_path / "moved"
    moved.mkdir()
    for folder in (a, b, ens):
        folder.rename(moved / folder.name)
    served = open_run_index(moved / "ensemble", moved / "ensemble" / "index-hpo")
    got = served.search(query, k=len(TERMS))[0]
    assert dict(zip(got.ids, got.scores, strict=True)) == pytest.approx(expected, abs=1e-5)
    assert [str(Path(c.encoder.spec()["path"]).parent.name) for c in served.index.components] == ["a", "b"]
    # each member encodes queries its own way (a member of another pretrained kind keeps its prompts)
    assert [c.encoder.spec()["query_prompt"] for c in served.index.components] == [
        enc_a.spec()["query_prompt"], enc_b.spec()["query_prompt"]]
