"""The recall-and-rank normaliser: MTCG recall → KAR re-ranking → FB fusion and term-count decision.

:class:`ProcedureNormalizer` runs every variant of the paper's Tables 2 and 3 from one object:

* ``recall="mtcg"`` (the system) or ``"bm25"`` (the "w/o MTCG" ablation: BM25 character recall;
  the count head and the distances ``s_c`` still come from MTCG);
* ``fusion="fb"`` (``(s_c + s_r)/2``), ``"recall"`` (``s_c`` only, "w/o KAR") or ``"ranker"``
  (``s_r`` only, "w/o FB"); the count rule is the same for all three;
* ``fusion="learned"`` (not in the paper): :class:`~.fusion.LearnedFusion` over ``s_c``, ``s_r``
  and the votes of a :class:`~.memory.MentionMemory` of labelled training mentions (a run of
  ``configs/procedures/fusion.yaml`` adds both to a KAR run).

:meth:`normalize_one` is the latency path: the mention's frozen bottom is computed once and
shared by MTCG and KAR; candidate bottoms come from the cache of every standard name.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medrank.pipelines.procedures.artefacts import NORMALIZER_MARKER
from medrank.pipelines.procedures.data import Mention, TermBase
from medrank.pipelines.procedures.fusion import (
    DEFAULT_THETA,
    LearnedFusion,
    check_theta,
    fuse,
    recall_scores,
    select_terms,
)
from medrank.pipelines.procedures.kar import KeywordAttentiveRanker, kar_bottom_for
from medrank.pipelines.procedures.memory import MentionMemory
from medrank.pipelines.procedures.mtcg import MTCG, euclidean_from_cosine
from medrank.records import require_texts

log = logging.getLogger(__name__)

RECALLS = ("mtcg", "bm25")
FUSIONS = ("fb", "recall", "ranker", "learned")
MANIFEST = NORMALIZER_MARKER


@dataclass
class Prediction:
    """One mention's output: the predicted terms (best first) with codes and every intermediate score."""

    mention: str
    terms: list[str]
    codes: list[tuple[str, ...]]
    candidates: list[str]
    final: list[float]
    recall_score: list[float]
    ranker_score: list[float] | None
    count_class: int
    extra: dict[str, Any] = field(default_factory=dict)
    #: the lowest probability among the chosen terms (see :func:`term_confidence`); ``None`` for recall alone
    confidence: float | None = None

    @property
    def low_confidence(self) -> bool | None:
        """``True`` when some chosen term is more likely wrong than right (``confidence < LOW_CONFIDENCE``)."""
        return None if self.confidence is None else self.confidence < LOW_CONFIDENCE

    def to_dict(self) -> dict[str, Any]:
        return {
            "terms": [{"name": t, "codes": list(c)} for t, c in zip(self.terms, self.codes, strict=True)],
            "count": ["1", "2", ">=3"][self.count_class],
            "confidence": None if self.confidence is None else round(self.confidence, 4),
            "low_confidence": self.low_confidence,
            "candidates": [
                {"name": c, "final": round(f, 4), "s_c": round(s, 4), "s_r": None if self.ranker_score is None else round(self.ranker_score[i], 4)}
                for i, (c, f, s) in enumerate(zip(self.candidates, self.final, self.recall_score, strict=True))
            ],
        }


#: a chosen term whose probability is below this is flagged: more likely wrong than right
LOW_CONFIDENCE = 0.5


def term_confidence(fusion: str, chosen: Sequence[int], final: Sequence[float], s_r: Sequence[float] | None) -> float | None:
    """The lowest probability that a chosen candidate (indices ``chosen``) is a gold term.

    Two scores are probabilities: the learned fusion's output (a logistic regression fitted on
    train-valid labels) and KAR's sigmoid ``s_r`` (trained with BCE), so the learned fusion reads
    ``final`` and FB / the ranker alone read ``s_r``. FB's ``(s_c + s_r)/2`` is not one: ``s_c`` sums
    to 9 over 10 candidates, so it is near 0.9 for any mention. Recall alone has none (``None``).
    Nonsense input (no procedure at all) gets a probability near 0 and is flagged.
    """
    if not chosen:
        return None
    if fusion == "learned":
        return float(min(final[i] for i in chosen))
    if s_r is None or fusion == "recall":
        return None
    return float(min(s_r[i] for i in chosen))


def check_mentions(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, or a clear error: every mention must be a string with some non-space text.

    Without this an empty mention is still embedded (as the bare ``[CLS] [SEP]``) and gets a
    confident-looking standard name.
    """
    if isinstance(texts, (str, bytes)):
        # a single string would be normalised character by character
        raise TypeError("pass a list of mentions (normalize_one takes a single one)")
    return require_texts(texts, "mention")


class ProcedureNormalizer:
    """MTCG + KAR + FB over a :class:`TermBase`.

    Args:
        mtcg: the candidate generator; kar: the ranker (``None`` only with ``fusion="recall"``).
        terms: the standard names; k: candidates per mention (``k_c``, 10); theta: FB threshold.
        prior: the training-label prior (:class:`TermPrior`) or ``None``.
        learned, memory: the learned fusion and its mention memory (both needed by ``fusion="learned"``,
            which uses ``learned.theta`` instead of ``theta``).
    """

    def __init__(
        self,
        mtcg: MTCG,
        kar: KeywordAttentiveRanker | None,
        terms: TermBase,
        k: int = 10,
        theta: float = DEFAULT_THETA,
        recall: str = "mtcg",
        fusion: str = "fb",
        show_progress: bool = False,
        prior: TermPrior | None = None,
        learned: LearnedFusion | None = None,
        memory: MentionMemory | None = None,
    ) -> None:
        if recall not in RECALLS:
            raise ValueError(f"recall must be one of {RECALLS}, got {recall!r}")
        if fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {fusion!r}")
        if kar is None and fusion != "recall":
            raise ValueError("a ranker is needed unless fusion='recall'")
        if fusion == "learned" and (learned is None or memory is None):
            raise ValueError("fusion='learned' needs a LearnedFusion and a MentionMemory (train configs/procedures/fusion.yaml)")
        if k < 3:
            raise ValueError(f"k must be >= 3 (the count rule outputs up to 3 terms), got {k}")
        self.mtcg, self.kar, self.terms = mtcg, kar, terms
        self.k, self.theta, self.recall, self.fusion = k, check_theta(float(theta)), recall, fusion
        self.show_progress = show_progress
        #: where training cached the names' frozen-bottom states (set by :meth:`load_cache`)
        self.cache_dir: str | None = None
        # the frozen bottoms whose names' states were not on disk: warm_up writes them there
        self._names_not_cached: list[Any] = []
        self.prior = prior
        self.learned, self.memory = learned, memory
        self._term_emb: np.ndarray | None = None
        self._term_emb_version: Any = None
        self._index: Any = None
        self._index_prior: Any = None
        self._bonus: tuple[Any, np.ndarray] | None = None
        self._bm25: Any = None

    # -- loading -------------------------------------------------------------------------------------
    @classmethod
    def load(
        cls, directory: str | Path, terms: TermBase | None = None, data_root: str | None = None, backend: str = "torch",
        **kwargs: Any,
    ) -> ProcedureNormalizer:
        """From a KAR or fusion run directory (``normalizer.json`` names the MTCG model and the tuned θ).

        A fusion run (``configs/procedures/fusion.yaml``) also holds the learned fusion and the
        mention memory and defaults to ``fusion="learned"``; pass ``fusion="fb"`` for the paper's FB.
        ``backend``: what computes the frozen bottom shared by MTCG and KAR (``"torch"``, ``"onnx"``,
        ``"onnx-int8"``; see :meth:`~medrank.models.BiEncoder.set_bottom_backend`); the trained top
        blocks, the count head and KAR's joint blocks stay torch.
        """
        from medrank.pipelines.procedures.data import load_keywords, load_term_base

        directory = Path(directory)
        manifest_path = directory / MANIFEST
        if not manifest_path.exists():
            raise FileNotFoundError(f"{directory} has no {MANIFEST}: pass a KAR run directory written by `medrank train`")
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        mtcg_dir = Path(manifest["mtcg"])
        if not mtcg_dir.is_absolute():
            mtcg_dir = (directory / mtcg_dir).resolve()
        mtcg = MTCG.load(mtcg_dir)
        kar_dir = Path(manifest["kar_model"]) if "kar_model" in manifest else directory / "model"
        if "kar_model" in manifest and not kar_dir.is_absolute():
            kar_dir = (directory / kar_dir).resolve()
        spec = json.loads((kar_dir / "kar.json").read_text(encoding="utf-8"))
        kw = load_keywords(data_root)
        kar = KeywordAttentiveRanker(
            kar_bottom_for(mtcg, spec.get("train_layers"), trained_key=mtcg.weights_digest), kw.sites, kw.types,
            hidden=spec.get("ffn_hidden", 256), interaction=spec.get("interaction", False),
            keyword_attention=spec.get("keyword_attention", True), list_context=spec.get("list_context", False),
        )
        kar.load_weights(kar_dir)
        kwargs.setdefault("theta", manifest.get("theta", DEFAULT_THETA))
        kwargs.setdefault("k", manifest.get("k", 10))
        kwargs.setdefault("prior", TermPrior.load(mtcg_dir))
        kwargs.setdefault("learned", LearnedFusion.load(directory / "model"))
        kwargs.setdefault("memory", MentionMemory.load(directory / "model"))
        kwargs.setdefault("fusion", manifest.get("fusion", "fb"))
        kwargs.setdefault("recall", manifest.get("recall", "mtcg"))
        norm = cls(mtcg, kar, terms or load_term_base(data_root), **kwargs)
        norm.set_backend(backend)
        norm.load_cache(manifest.get("cache_dir"))
        return norm

    def set_backend(self, backend: str) -> None:
        """Compute every frozen bottom (MTCG's, and KAR's when it reads another) with ``backend``.

        The names' cached states and vectors belong to the backend that computed them: after a
        change they are read from (or computed into) that backend's own cache entries.
        """
        for bottom in self.frozen_bottoms():
            bottom.set_bottom_backend(backend)
        self._term_emb, self._term_emb_version, self._index = None, None, None
        if self.cache_dir:  # changed after loading: read the new backend's cached names, if any
            self.load_cache(self.cache_dir)

    @property
    def backend(self) -> str:
        """What computes the frozen bottom (``"torch"``, ``"onnx"`` or ``"onnx-int8"``)."""
        return self.mtcg.bi.bottom_backend

    def load_cache(self, cache_dir: str | None) -> None:
        """Read the frozen-bottom states of standard names cached by training (no-op for ``None``)."""
        if cache_dir:
            if not Path(cache_dir).is_dir():
                # a run copied from another machine names that machine's cache: use this one's
                from medrank.pipelines.procedures.config import default_cache_dir

                cache_dir = default_cache_dir()
            self.cache_dir = cache_dir
            n = 0
            self._names_not_cached = []
            for bottom in self.frozen_bottoms():
                n += bottom.load_cache(cache_dir)
                # missing or partial (KAR's training caches only the names it saw as candidates):
                # warm_up fills in the rest once and writes them back
                names = bottom.caches.get("passage")
                if not names or names.missing(self.terms.names):
                    self._names_not_cached.append(bottom)
            log.info("frozen-bottom cache: %d texts from %s", n, cache_dir)

    def frozen_bottoms(self) -> list[Any]:
        """MTCG's frozen bottom, and KAR's when KAR has more or fewer joint blocks than MTCG trains."""
        if self.kar is None or self.kar.bottom is self.mtcg.bi:
            return [self.mtcg.bi]
        return [self.mtcg.bi, self.kar.bottom]

    # -- recall ------------------------------------------------------------------------------------------
    def term_embeddings(self) -> np.ndarray:
        if self._term_emb is None or self._term_emb_version != self.mtcg.bi.weights_version():
            self._term_emb = self._stored_term_embeddings()
            if self._term_emb is None:
                self._term_emb = self.mtcg.encode_terms(self.terms.names, show_progress=self.show_progress)
                self._store_term_embeddings(self._term_emb)
            self._term_emb_version = self.mtcg.bi.weights_version()
            self._index = None
        return self._term_emb

    # -- the names' MTCG embeddings on disk: an MTCG that trains every block takes ~1 min to embed the
    # 9,468 names on one thread at every start; they depend only on the loaded weights and the names
    def _term_embeddings_file(self) -> Path | None:
        import hashlib

        digest = self.mtcg.loaded_digest()
        if not self.cache_dir or digest is None:
            return None  # no cache folder, or weights not loaded from a file (or trained since)
        names = hashlib.sha256("\n".join(self.terms.names).encode("utf-8")).hexdigest()
        key = hashlib.sha1(f"{self.mtcg.bi.cache_key()}|{digest}|{names}|v1".encode()).hexdigest()[:16]
        return Path(self.cache_dir) / f"names-{key}.safetensors"

    def _stored_term_embeddings(self) -> np.ndarray | None:
        path = self._term_embeddings_file()
        if path is None or not path.is_file():
            return None
        from safetensors.numpy import load as load_bytes

        try:
            emb = load_bytes(path.read_bytes()).get("embeddings")
        except Exception as exc:  # a damaged file is re-computed, not fatal
            log.warning("ignoring the name-embedding cache %s (%s)", path, exc)
            return None
        if emb is None or emb.shape != (len(self.terms), self.mtcg.dim):
            return None
        from medrank.cache_admin import mark_used

        mark_used(path)
        return emb.astype(np.float32, copy=False)

    def _store_term_embeddings(self, emb: np.ndarray) -> None:
        path = self._term_embeddings_file()
        if path is None:
            return
        from safetensors.numpy import save as save_bytes

        from medrank.utils.io import atomic_write_bytes

        try:
            atomic_write_bytes(path, save_bytes({"embeddings": np.ascontiguousarray(emb, dtype=np.float32)}))
        except OSError as exc:
            log.warning("could not write the name-embedding cache %s (%s)", path, exc)

    def _prior_column(self) -> np.ndarray:
        """``(n_terms,)`` the prior's bonus per name (zeros without a prior); cached per prior."""
        if self._bonus is None or self._bonus[0] != self._prior_key():
            if self.prior is None or self.prior.weight == 0:
                column = np.zeros(len(self.terms), dtype=np.float32)
            else:
                column = self.prior.bonus(self.terms)
            self._bonus = (self._prior_key(), column)
        return self._bonus[1]

    def index(self, term_emb: np.ndarray | None = None) -> Any:
        """A flat inner-product vector index of the names (cosine order = Euclidean order for unit vectors).

        With a :class:`TermPrior` the name vectors get one extra column holding the bonus and the
        mention vectors a 1 there, so the exact flat search ranks by ``cos + bonus``. ``term_emb``:
        what :meth:`term_embeddings` just returned (its weight-version check runs once per call,
        not again here, on the latency path).
        """
        from medrank.index import DenseIndex

        emb = self.term_embeddings() if term_emb is None else term_emb
        if self._index is None or self._index_prior != self._prior_key():
            emb = np.concatenate([emb, self._prior_column()[:, None]], axis=1)
            index = DenseIndex(None, factory="flat")
            index.entry_ids, index.entry_texts, index.entry_items = list(self.terms.names), list(self.terms.names), list(self.terms.names)
            index.build_from_vectors(emb)
            self._index, self._index_prior = index, self._prior_key()
        return self._index

    def _prior_key(self) -> Any:
        return self.prior  # frozen and hashable: a new or changed prior rebuilds the bonus and the index

    def bm25(self) -> Any:
        from medrank.index import BM25Index

        if self._bm25 is None:
            self._bm25 = BM25Index(language="zh", zh_mode="char")
            self._bm25.build(self.terms.names, self.terms.names)
        return self._bm25

    def retrieve(self, mention_emb: np.ndarray, texts: Sequence[str], k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(n, k)`` candidate rows and their Euclidean distances to the mention (ascending)."""
        k = k or self.k
        term_emb = self.term_embeddings()
        if self.recall == "mtcg":
            query = np.concatenate([mention_emb, np.ones((len(mention_emb), 1), dtype=mention_emb.dtype)], axis=1)
            rankings = self.index(term_emb).search_vectors([str(i) for i in range(len(texts))], query, k)
            rows = np.array([[self.terms.row[i] for i in r.ids] for r in rankings], dtype=np.int64)
        else:
            rankings = self.bm25().search(list(texts), k=k)
            rows = np.array([[self.terms.row[i] for i in r.ids] + [0] * (k - len(r.ids)) for r in rankings], dtype=np.int64)
        cos = np.einsum("nd,nkd->nk", mention_emb, term_emb[rows]) + self._prior_column()[rows]
        dist = euclidean_from_cosine(np.minimum(cos, 1.0))
        if self.recall == "bm25":  # keep BM25's order; distances only feed s_c
            return rows, dist
        order = np.argsort(dist, axis=1, kind="stable")
        return np.take_along_axis(rows, order, 1), np.take_along_axis(dist, order, 1)

    # -- the whole pipeline --------------------------------------------------------------------------
    def _decide(
        self, text: str, rows: np.ndarray, dist: np.ndarray, s_r: np.ndarray | None, count_class: int, votes: np.ndarray | None = None
    ) -> Prediction:
        s_c = recall_scores(dist[None])[0]
        theta = self.theta
        if self.fusion == "fb":
            final = fuse(s_c, s_r)
        elif self.fusion == "recall":
            final = s_c
        elif self.fusion == "learned":
            assert self.learned is not None and votes is not None
            final, theta = self.learned.score(s_c, np.asarray(s_r), votes), self.learned.theta
        else:
            final = np.asarray(s_r, dtype=np.float64)
        cands = [self.terms.names[i] for i in rows]
        final_list, ranker = final.tolist(), None if s_r is None else np.asarray(s_r).tolist()
        chosen = select_terms(cands, final_list, count_class, theta)
        where = {name: i for i, name in enumerate(cands)}
        return Prediction(
            mention=text,
            terms=chosen,
            codes=[self.terms.codes[self.terms.row[t]] for t in chosen],
            candidates=cands,
            final=final_list,
            recall_score=s_c.tolist(),
            ranker_score=ranker,
            count_class=count_class,
            confidence=term_confidence(self.fusion, [where[t] for t in chosen], final_list, ranker),
        )

    def predict(self, texts: Sequence[str], batch_size: int = 256) -> list[Prediction]:
        """Normalise many mentions (batched; mention bottoms are cached)."""
        from tqdm.auto import tqdm

        texts = check_mentions(texts)
        if not texts:
            return []
        emb, probs = self.mtcg.encode_mentions(texts, batch_size=batch_size)
        rows, dist = self.retrieve(emb, texts)
        s_r = None
        if self.kar is not None and self.fusion != "recall":
            pairs_m = [t for t in texts for _ in range(rows.shape[1])]
            pairs_c = [self.terms.names[i] for r in rows for i in r]
            vec_m = np.repeat(emb, rows.shape[1], axis=0)
            vec_c = self.term_embeddings()[rows.reshape(-1)]
            scores = []
            step = 64 * rows.shape[1]
            for start in tqdm(range(0, len(pairs_m), step), desc="KAR", disable=not self.show_progress):
                sl = slice(start, start + step)
                scores.append(self.kar.score(pairs_m[sl], pairs_c[sl], vec_m[sl], vec_c[sl]))
            s_r = np.concatenate(scores).reshape(rows.shape) if scores else np.zeros(rows.shape)
        votes = self._votes(texts, rows)
        count = probs.argmax(1)
        return [
            self._decide(t, rows[i], dist[i], None if s_r is None else s_r[i], int(count[i]), None if votes is None else votes[i])
            for i, t in enumerate(texts)
        ]

    def _votes(self, texts: Sequence[str], rows: np.ndarray) -> np.ndarray | None:
        """The mention memory's ``(n, k, 3)`` votes for the candidates (only with ``fusion="learned"``)."""
        if self.fusion != "learned":
            return None
        assert self.memory is not None
        return self.memory.votes(texts, [[self.terms.names[i] for i in r] for r in rows])

    @torch.no_grad()
    def normalize_one(self, text: str) -> Prediction:
        """One mention end to end, nothing cached for the mention (the latency path)."""
        from medrank.encoders.blocks import continue_frozen, eval_mode
        from medrank.pipelines.procedures.mtcg import bottom_states

        check_mentions([text])
        with eval_mode(self.mtcg), (eval_mode(self.kar) if self.kar is not None else eval_mode(self.mtcg)):
            kar_bottom = self.kar.bottom if self.kar is not None else self.mtcg.bi
            kar_hidden, mask = bottom_states(kar_bottom, [text], "query", use_cache=False)
            # MTCG continues from KAR's states: through the frozen blocks between when KAR is deeper
            # (reads a shallower bottom), from KAR's block n_frozen when KAR reads MTCG's own trained blocks
            start = max(kar_bottom.n_frozen, self.mtcg.bi.n_frozen)
            hidden = continue_frozen(self.mtcg.bi.encoder.model, kar_hidden, mask, kar_bottom.n_frozen, start)
            emb_t, logits = self.mtcg.mention_forward(hidden, mask, start)
            emb = emb_t.float().cpu().numpy()
            rows, dist = self.retrieve(emb, [text])
            s_r = None
            if self.kar is not None and self.fusion != "recall":
                cands = [self.terms.names[i] for i in rows[0]]
                kar_bottom.fill_cache(cands, "passage")
                ch, cm = kar_bottom._cache_for("passage").gather(cands, kar_bottom.device)
                n = len(cands)
                vec_c = torch.from_numpy(self._term_emb[rows[0]])  # checked against the weights by retrieve() just above
                logit = self.kar.forward_states(
                    [text] * n, cands, kar_hidden.expand(n, -1, -1), mask.expand(n, -1), ch, cm, emb_t.expand(n, -1), vec_c
                )
                s_r = torch.sigmoid(logit).float().cpu().numpy()
        votes = self._votes([text], rows)
        return self._decide(text, rows[0], dist[0], s_r, int(logits.argmax(-1)[0]), None if votes is None else votes[0])

    def warm_up(self) -> None:
        """Encode (and cache the frozen bottom and KAR's keyword flags of) every standard name before timing anything."""
        self.term_embeddings()  # read from the stored file, or computed (filling MTCG's bottom cache with the names)
        for bottom in self.frozen_bottoms():
            bottom.fill_cache(self.terms.names, "passage")
        if self.cache_dir:
            for bottom in self._names_not_cached:
                # the training cache was missing (moved, or written under an older cache key): write the
                # names' states back (never a mention's) so the next start loads them
                try:
                    bottom.save_cache(self.cache_dir, kinds=("passage",))
                except OSError as exc:
                    log.warning("could not write the frozen-bottom cache to %s (%s)", self.cache_dir, exc)
            self._names_not_cached = []
        if self.kar is not None and self.kar.keyword_attention:
            self.kar.warm_name_flags(self.terms.names)


# -- the training-label prior -----------------------------------------------------------------------


@dataclass(frozen=True)
class TermPrior:
    """A bonus ``weight`` added to the recall cosine of every standard name used as a gold label in training.

    Not in the paper (an extension, off with ``weight = 0``): 88 % of the visible val mentions map
    only to names that also label some training mention (956 of 9,468 names), and a bi-encoder
    trained for a few CPU epochs does not learn that prior by itself. ``weight`` is tuned on the
    train-side validation split with the names of the fit split (:func:`tune_prior`), then the
    saved prior holds the names of the whole training file.
    """

    terms: frozenset[str]
    weight: float

    FILE = "prior.json"

    def bonus(self, terms: TermBase) -> np.ndarray:
        return np.array([self.weight if n in self.terms else 0.0 for n in terms.names], dtype=np.float32)

    def save(self, directory: str | Path) -> None:
        """Write the prior (its names and weight) as JSON into ``directory``."""
        from medrank.utils.io import atomic_write_json

        atomic_write_json(Path(directory) / self.FILE, {"weight": self.weight, "terms": sorted(self.terms)})

    @classmethod
    def load(cls, directory: str | Path) -> TermPrior | None:
        """The prior saved in ``directory``, or None when the run has none."""
        path = Path(directory) / cls.FILE
        if not path.exists():
            return None
        raw = json.loads(path.read_text(encoding="utf-8"))
        return cls(frozenset(raw["terms"]), float(raw["weight"]))


def tune_prior(
    mention_emb: np.ndarray, mentions: Sequence[Mention], term_emb: np.ndarray, terms: TermBase, seen: set[str],
    grid: Sequence[float] = (0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1),
) -> tuple[float, dict[float, float]]:
    """The prior weight maximising top-1 accuracy (top candidate is a gold name) on held-out mentions."""
    cos = mention_emb @ term_emb.T
    flag = np.array([n in seen for n in terms.names], dtype=np.float32)
    gold = [{terms.row[t] for t in m.terms} for m in mentions]
    scores: dict[float, float] = {}
    for w in grid:
        top = (cos + w * flag).argmax(1)
        scores[float(w)] = round(100.0 * float(np.mean([int(t) in g for t, g in zip(top, gold, strict=True)])), 2)
    best = max(scores, key=lambda w: (scores[w], -w))
    return best, scores


# -- evaluation -----------------------------------------------------------------------------------------


def timed(fn: Any, *args: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0
