"""History-taking question re-ranking (Zhu et al., "Dialogue-Contextualized Re-ranking for Medical
History-Taking", 2023) on public dialogues.

* :mod:`.builders` turn raw MTS-Dialog / ACI-Bench dialogues (and DDXPlus cases) into re-ranking
  samples: a dialogue context, 30 candidate questions from a question bank, and the questions the
  doctor actually asked next as positives;
* :mod:`.first_stage` is the "expert system" retriever (BM25 + dense + frequency prior);
* :mod:`.models` holds the global re-ranker (one long input, one pooling token per candidate)
  and the cross-encoder / bi-encoder baselines;
* :mod:`.losses` the pointwise, pairwise and listwise ranking losses (one file each);
* :mod:`.training` / :mod:`.evaluation` / :mod:`.cli` plug them into ``medrank train``,
  ``medrank evaluate`` and ``medrank rerank``.
"""
