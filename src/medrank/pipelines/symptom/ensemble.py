"""An ensemble of trained English layperson runs: task ``symptom-ensemble``.

Two bi-encoders trained by one recipe err partly on different phrases, whether they start from two seeds of one
encoder or from encoders pretrained on other text (MiniLM and multilingual e5-small). The ensemble scores a
(phrase, term) pair by the mean of the members' cosines (a deep ensemble, Lakshminarayanan et al., NeurIPS 2017:
average the members' outputs), through :meth:`ConceptRetriever.mean_of <medrank.retrieval.concept.ConceptRetriever.mean_of>` (a
:class:`~medrank.index.hybrid.HybridIndex` with ``method="mean"``) over the
members' own dense indexes, so each entry keeps the vectors its member encoded and nothing is trained again. Its
scores stay cosines, so the set decision reads them as it reads one run's; the decision is fitted again over the
ensemble's search (:func:`~medrank.pipelines.symptom.synthetic.fit_layperson_sets`).

An ensemble run folder holds what a trained run serves (``detector.json``, ``index-hpo``, ``sets-hpo.json``) and
``results.json`` (validation metrics of each member and of the ensemble, on the members' shared validation split),
but no ``model/``: ``detector.json`` names the members (relative to the ensemble's folder) and its index loads each
member's encoder from the member's own ``model/`` (:func:`~medrank.pipelines.symptom.artefacts.open_run_index`), so
the members and the ensemble move together.

    medrank train configs/symptom/cpu/hpo-layperson-bi-hardnce-best-4l-def.yaml
    medrank train configs/symptom/cpu/hpo-layperson-bi-hardnce-best-e5-4l-def.yaml
    medrank train configs/symptom/cpu/hpo-layperson-ensemble-4l-def-e5.yaml
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class EnsembleSettings:
    """The ``symptom-ensemble`` config keys besides ``output_dir``."""

    #: the finished ``hpo-layperson`` run folders whose encoders are averaged (two or more)
    members: tuple[str, ...] = ()
    #: one weight per member (default: equal)
    weights: tuple[float, ...] | None = None
    #: items each member retrieves per query before the mean (an item missing from a member's list takes the
    #: list's last score)
    depth: int = 100
    #: the seed of the set decision's synthetic complaints (the members' own, by default of the recipe)
    seed: int = 13
    threads: int | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.members, (str, bytes)) or len(self.members) < 2:
            raise ValueError(f"an ensemble needs two or more member runs (members: [RUN, RUN, ...]), got {self.members!r}")
        if len(set(self.members)) != len(self.members):
            raise ValueError(f"the members must be different runs, got {list(self.members)}")
        if self.weights is not None:
            if len(self.weights) != len(self.members) or not all(
                    isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0
                    for w in self.weights):
                raise ValueError(f"weights must be one positive number per member, got {self.weights!r}")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 1:
            raise ValueError(f"depth must be a whole number >= 1, got {self.depth!r}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EnsembleSettings:
        from medrank.config import known_keys_only

        d = known_keys_only(cls, d, "symptom-ensemble settings")
        if isinstance(d.get("members"), list):
            d["members"] = tuple(str(m) for m in d["members"])
        if isinstance(d.get("weights"), list):
            d["weights"] = tuple(d["weights"])
        return cls(**d)

    @property
    def member_weights(self) -> list[float]:
        return list(self.weights) if self.weights is not None else [1.0] * len(self.members)


def _member_config(run: Path) -> Any:
    from medrank.pipelines.symptom.artefacts import DETECTOR_MARKER
    from medrank.pipelines.symptom.config import SymptomConfig

    need = [run / "config.json", run / DETECTOR_MARKER, run / "model", run / "index-vocab", run / "index-hpo"]
    missing = [p.name for p in need if not p.exists()]
    if missing:
        raise FileNotFoundError(f"{run} is not a finished hpo-layperson run ({', '.join(missing)} missing); train it "
                                f"first with `medrank train CONFIG`")
    cfg = SymptomConfig.from_dict(json.loads((run / "config.json").read_text(encoding="utf-8")))
    if cfg.dataset != "hpo-layperson":
        raise ValueError(f"an ensemble averages hpo-layperson runs, {run} is a {cfg.dataset!r} run")
    return cfg


def build_ensemble_run(config: Mapping[str, Any], output_dir: PathLike | None = None) -> dict[str, Any]:
    """Average the encoders of ``config["members"]`` into one served English run (see the module docstring); writes
    ``index-hpo``, ``sets-hpo.json``, ``detector.json``, ``config.json`` and ``results.json`` to ``output_dir`` (or
    the config's ``output_dir``). Running it again rebuilds the folder from the members."""
    from medrank.config import seed_everything, set_run_threads
    from medrank.pipelines.symptom.artefacts import DETECTOR_MARKER, open_run_index
    from medrank.pipelines.symptom.synthetic import fit_layperson_sets
    from medrank.pipelines.symptom.task import EVAL_METRICS, load_task_data
    from medrank.retrieval.concept import ConceptRetriever, evaluate_retriever
    from medrank.utils.io import atomic_write_json

    config = dict(config)
    config.pop("task", None)
    out = config.pop("output_dir", None)
    settings = EnsembleSettings.from_dict(config)
    if not (output_dir or out):
        raise ValueError("a symptom-ensemble config needs output_dir: the folder the ensemble run is written to")
    output_dir = Path(output_dir or out)
    members = [Path(m) for m in settings.members]
    if any(output_dir.resolve() == m.resolve() for m in members):
        raise ValueError(f"output_dir {output_dir} is one of the members; give the ensemble its own folder")
    cfgs = [_member_config(m) for m in members]
    if len({c.use_definitions for c in cfgs}) != 1:
        raise ValueError("the members index different entries (use_definitions differs): their scores cannot be averaged")
    output_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    set_run_threads(settings.threads)
    seed_everything(settings.seed)
    weights = settings.member_weights

    # validation: each member and the mean over the members' own validation vocabularies (the same split for all)
    valid = load_task_data(cfgs[0]).valid
    vocab = [open_run_index(m, m / "index-vocab") for m in members]
    results: dict[str, Any] = {}
    for m, r in zip(members, vocab, strict=True):
        results[str(m)] = evaluate_retriever(r, valid, EVAL_METRICS)["metrics"]
    ensemble_valid = evaluate_retriever(ConceptRetriever.mean_of(vocab, weights, settings.depth), valid, EVAL_METRICS)
    log.info("ensemble of %d runs, validation: %s", len(members), ensemble_valid["metrics"])
    del vocab

    # what the service serves: every HPO name and synonym, each member's vectors, and the decision over their mean
    served = ConceptRetriever.mean_of([open_run_index(m, m / "index-hpo") for m in members], weights, settings.depth)
    served.save(output_dir / "index-hpo")
    encoders = [c.encoder for c in served.index.components]
    valid_terms = [t for q in valid.queries for t in valid.qrels.relevant(q.id)]
    layperson = fit_layperson_sets(encoders, valid_terms, output_dir, seed=settings.seed,
                                   use_definitions=cfgs[0].use_definitions, write_index=False, depth=settings.depth,
                                   weights=weights, data_root=cfgs[0].data_root)
    name = settings.name or output_dir.name
    atomic_write_json(output_dir / "config.json", {"task": "symptom-ensemble", **asdict(settings) | {"name": name},
                                                   "output_dir": str(output_dir)})
    summary = {
        "name": name,
        "dataset": "hpo-layperson",
        "members": [str(m) for m in members],
        "weights": weights,
        "results": {"vocab": {"metrics": ensemble_valid["metrics"], "n_queries": ensemble_valid.get("n_queries")}},
        "members_validation": results,
        "sets_hpo": layperson,
        "seconds": round(time.perf_counter() - started, 1),
    }
    atomic_write_json(output_dir / "results.json", summary)
    # the members as seen from the ensemble's folder: the two can move together
    relative = [os.path.relpath(m.resolve(), output_dir.resolve()) for m in members]
    atomic_write_json(output_dir / DETECTOR_MARKER, {"name": name, "candidates": {"hpo": "index-hpo"}, "beta": {},
                                                     "members": relative, "weights": weights, "k": 5})
    return summary
