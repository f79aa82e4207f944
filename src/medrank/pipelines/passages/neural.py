"""Neural matching baselines of the CDV paper's table: DSSM (representation) and KNRM (interaction).

* **DSSM** (Huang et al., CIKM 2013): each text is a bag of hashed letter
  trigrams of its words ("word hashing"), fed to a tanh MLP (300 → 300 → 128);
  the score is the cosine of the query and passage vectors, scaled by γ.
* **KNRM** (Xiong et al., SIGIR 2017): a word-by-word cosine translation
  matrix between query and passage GloVe embeddings (trainable), 11 RBF
  kernels (μ = 1, 0.9 … −0.9; σ = 10⁻³ for exact match, 0.1 otherwise),
  log soft-TF pooled over query words, one linear layer → score.

Both train on the same self-supervised (entity; aspect) → passage groups as
the cross-encoder, with the listwise softmax loss (tasks ``passage-dssm`` and
``passage-knrm``). Passages are cut to their first ``max_passage_words`` words.

The recipe (keys and defaults) is :class:`~.config.NeuralRerankerConfig`.
"""

from __future__ import annotations

import json
import re
import time
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from medrank.data.medquad import PassageCorpus, corpus_from_documents
from medrank.pipelines.passages.losses import ListwiseSoftmaxLoss
from medrank.pipelines.passages.pairs import TrainingGroup, query_text, training_groups
from medrank.pipelines.passages.protocol import query_fields
from medrank.records import Query

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str, limit: int | None = None) -> list[str]:
    w = _WORD.findall(text.lower())
    return w[:limit] if limit else w


def letter_trigrams(word: str) -> list[str]:
    padded = f"#{word}#"
    return [padded[i : i + 3] for i in range(len(padded) - 2)]


class DSSM(nn.Module):
    """Word-hashing DSSM. Inputs are (ids, offsets) of an ``EmbeddingBag`` over trigram buckets."""

    def __init__(self, buckets: int = 30000, hidden: int = 300, out: int = 128, gamma: float = 10.0) -> None:
        super().__init__()
        self.config = {"buckets": buckets, "hidden": hidden, "out": out, "gamma": gamma}
        self.buckets = buckets
        self.bag = nn.EmbeddingBag(buckets, hidden, mode="sum")
        self.l2 = nn.Linear(hidden, hidden)
        self.l3 = nn.Linear(hidden, out)
        self.gamma = gamma

    def hash_texts(self, texts: Sequence[str], limit: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        ids: list[int] = []
        offsets: list[int] = []
        for t in texts:
            offsets.append(len(ids))
            for w in words(t, limit):
                ids.extend(zlib.crc32(g.encode()) % self.buckets for g in letter_trigrams(w))
        return torch.tensor(ids, dtype=torch.long), torch.tensor(offsets, dtype=torch.long)

    def embed(self, texts: Sequence[str], limit: int | None = None) -> torch.Tensor:
        ids, offsets = self.hash_texts(texts, limit)
        h = torch.tanh(self.bag(ids, offsets))
        h = torch.tanh(self.l2(h))
        return nn.functional.normalize(torch.tanh(self.l3(h)), dim=-1)

    def score(self, queries: Sequence[str], passages: Sequence[str], limit: int | None = None) -> torch.Tensor:
        return self.gamma * (self.embed(queries) * self.embed(passages, limit)).sum(-1)


class KNRM(nn.Module):
    """Kernel-pooling neural ranking model over (trainable) GloVe word embeddings."""

    def __init__(self, vocab: Sequence[str], vectors: np.ndarray, n_kernels: int = 11) -> None:
        super().__init__()
        self.config = {"n_kernels": n_kernels}
        self.vocab = {w: i + 1 for i, w in enumerate(vocab)}  # 0 = padding / unknown
        emb = np.zeros((len(vocab) + 1, vectors.shape[1]), dtype=np.float32)
        emb[1:] = vectors
        self.embedding = nn.Embedding.from_pretrained(torch.from_numpy(emb), freeze=False, padding_idx=0)
        mus = [1.0] + [1.0 - 0.1 - 0.2 * i for i in range(n_kernels - 1)]  # 1, 0.9, 0.7, …, -0.9
        sigmas = [1e-3] + [0.1] * (n_kernels - 1)
        self.register_buffer("mu", torch.tensor(mus).view(1, 1, 1, -1))
        self.register_buffer("sigma", torch.tensor(sigmas).view(1, 1, 1, -1))
        self.dense = nn.Linear(n_kernels, 1)

    def ids(self, texts: Sequence[str], limit: int | None = None) -> torch.Tensor:
        seqs = [[self.vocab.get(w, 0) for w in words(t, limit)] or [0] for t in texts]
        longest = max(len(s) for s in seqs)
        out = torch.zeros((len(seqs), longest), dtype=torch.long)
        for i, s in enumerate(seqs):
            out[i, : len(s)] = torch.tensor(s)
        return out

    def score(self, queries: Sequence[str], passages: Sequence[str], limit: int | None = None) -> torch.Tensor:
        q, d = self.ids(queries), self.ids(passages, limit)
        qm, dm = (q > 0).float(), (d > 0).float()
        qe = nn.functional.normalize(self.embedding(q), dim=-1)
        de = nn.functional.normalize(self.embedding(d), dim=-1)
        sim = torch.bmm(qe, de.transpose(1, 2)).unsqueeze(-1)  # (B, Lq, Ld, 1)
        k = torch.exp(-((sim - self.mu) ** 2) / (2 * self.sigma**2)) * dm[:, None, :, None]
        soft_tf = torch.log1p(k.sum(2)) * qm[:, :, None]  # log1p: a query word with no match adds 0, not -inf
        return self.dense(soft_tf.sum(1)).squeeze(-1)


def _knrm_vocabulary(corpus: PassageCorpus, limit: int) -> tuple[list[str], np.ndarray]:
    from medrank.pipelines.passages.features import GloVe

    glove = GloVe.from_package()
    seen: dict[str, None] = {}
    for p in corpus.passages:
        for w in words(p.text, limit):
            seen.setdefault(w, None)
    for q in corpus.queries:
        for w in words(query_text(*query_fields(q))):
            seen.setdefault(w, None)
    vocab = [w for w in seen if w in glove.index]
    vectors = np.asarray(glove.vectors[[glove.index[w] for w in vocab]], dtype=np.float32)
    return vocab, vectors


class NeuralRanker:
    """Re-ranks candidates with a trained DSSM or KNRM."""

    def __init__(self, model: nn.Module, corpus: PassageCorpus, limit: int, name: str) -> None:
        self.model = model.eval()
        self.texts = {p.id: p.text for p in corpus.passages}
        self.limit = limit
        self.name = name

    @torch.inference_mode()
    def score(self, queries: Sequence[Query], candidates: Mapping[str, Sequence[str]]) -> dict[str, np.ndarray]:
        out = {}
        for q in queries:
            cands = list(candidates[q.id])
            qt = query_text(*query_fields(q))
            out[q.id] = self.model.score([qt] * len(cands), [self.texts[c] for c in cands], self.limit).numpy()
        return out


def _save(model: nn.Module, cfg: dict[str, Any], directory: Path, vocab: list[str] | None) -> None:
    from safetensors.torch import save_file

    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"))
    (directory / "neural.json").write_text(json.dumps({"config": cfg, "model_config": model.config}), encoding="utf-8")
    if vocab is not None:
        (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")


def load_neural_ranker(run_dir: str | Path, corpus: PassageCorpus) -> NeuralRanker:
    from safetensors.torch import load_file

    run_dir = Path(run_dir)
    model_dir = run_dir / "model" if (run_dir / "model" / "neural.json").exists() else run_dir
    if not (model_dir / "neural.json").exists():
        raise FileNotFoundError(f"{run_dir} holds no trained DSSM/KNRM model (neural.json)")
    meta = json.loads((model_dir / "neural.json").read_text(encoding="utf-8"))
    cfg = meta["config"]
    state = load_file(str(model_dir / "model.safetensors"))
    if cfg["model"] == "dssm":
        model: nn.Module = DSSM(**meta["model_config"])
        name = "DSSM"
    else:
        vocab = (model_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
        model = KNRM(vocab, np.zeros((len(vocab), state["embedding.weight"].shape[1]), np.float32), **meta["model_config"])
        name = "KNRM"
    model.load_state_dict(state)
    return NeuralRanker(model, corpus, cfg["max_passage_words"], name)


def train_neural(config: dict[str, Any], output_dir: Path, resume: bool = True) -> dict[str, Any]:
    from medrank.pipelines.passages.cdv import load_split
    from medrank.pipelines.passages.config import NeuralRerankerConfig, start_run
    from medrank.pipelines.passages.cross_encoder import GroupBatches
    from medrank.training import Trainer, recipe_settings
    from medrank.utils.io import atomic_dir, atomic_write_json

    output_dir = Path(output_dir)
    recipe = start_run(NeuralRerankerConfig, config, output_dir, resume)
    cfg = recipe.to_dict()
    t0 = time.perf_counter()
    train_docs, _ = load_split(cfg)
    train = corpus_from_documents(train_docs, "medquad:train")
    groups = training_groups(train, cfg["group_size"], cfg["seed"])
    vocab = None
    if cfg["model"] == "dssm":
        model: nn.Module = DSSM(cfg["buckets"])
    else:
        vocab, vectors = _knrm_vocabulary(train, cfg["max_passage_words"])
        model = KNRM(vocab, vectors)
    loss = ListwiseSoftmaxLoss()
    g, limit = cfg["group_size"], cfg["max_passage_words"]

    def loss_fn(batch: list[TrainingGroup]) -> torch.Tensor:
        qs = [grp.query for grp in batch for _ in grp.passages]
        ps = [p for grp in batch for p in grp.passages]
        return loss(model.score(qs, ps, limit).view(len(batch), g))

    batches = GroupBatches(groups, cfg["batch_size"], cfg["seed"])
    trainer = Trainer(
        model, loss_fn, batches, output_dir, **recipe_settings(recipe), weight_decay=0.0,
        steps_per_epoch=len(batches(0)),
    )
    state = trainer.fit(resume=resume)
    with atomic_dir(output_dir / "model") as tmp:
        _save(model, cfg, tmp, vocab)
    summary = {
        "task": f"passage-{cfg['model']}",
        "model_dir": str(output_dir / "model"),
        "training_groups": len(groups),
        "steps": state.global_step,
        "final_train_loss": state.history[-1].get("train_loss") if state.history else None,
        "train_seconds": round(time.perf_counter() - t0, 1),
    }
    atomic_write_json(output_dir / "summary.json", summary)
    return summary
