"""Chinese procedure terminology normalisation: recall-and-rank with MTCG, KAR and FB.

Liang et al., "A combined recall and rank framework with online negative sampling for Chinese
procedure terminology normalization" (Bioinformatics 2021), on CHIP 2019 (``chip2019-procedures``):

* :mod:`.mtcg` — multi-task candidate generator (bi-encoder, Euclidean triplet loss, count head);
* :mod:`.negatives` — random / TF-IDF / tree-coding / keyword-replacing / online negatives;
* :mod:`.kar` — keywords-attentive ranker ([PS]/[PT] see only site/type keyword tokens);
* :mod:`.fusion` — fusion block (``(s_c + s_r)/2``, count rule, ``θ``);
* :mod:`.normalizer` — the end-to-end pipeline and its evaluation helpers;
* :mod:`.training` — both trainers on the shared :class:`~medrank.training.Trainer`;
* :mod:`.cli` — ``medrank train`` tasks, ``medrank evaluate --dataset chip2019-procedures``,
  ``medrank normalize``.
"""
