"""Answer passage retrieval for (entity, aspect) queries with Contextual Discourse Vectors (CDV).

Arnold et al., "Learning Contextualized Document Representations for
Healthcare Answer Retrieval", WWW 2020, on MedQuAD (:mod:`medrank.data.medquad`).

* :mod:`.text` — documents as sentence sequences with structural flags;
* :mod:`.features` — GloVe / MiniLM sentence features (MiniLM cached by text hash), IDF-GloVe label encoder;
* :mod:`.model` — the query model (:class:`~.model.LabelSpace`) and the BiLSTM document encoder (:class:`~.model.CDVModel`);
* :mod:`.losses` — pseudo-Huber (CDV) and listwise softmax (re-rankers), one per file;
* :mod:`.config` — the training recipes (:class:`~.config.CDVConfig` and the re-rankers');
* :mod:`.cdv` — training (task ``cdv``) and :class:`~.cdv.TrainedCDV`;
* :mod:`.index` — the sentence index, per-sentence score curves and their plot;
* :mod:`.protocol` — the paper's 64-candidate evaluation protocol and full-corpus retrieval;
* :mod:`.baselines`, :mod:`.cross_encoder`, :mod:`.neural` — BM25, TF-IDF, MiniLM bi-encoder,
  MiniLM cross-encoder, DSSM, KNRM;
* :mod:`.evaluation` — the ``medquad`` evaluator; :mod:`.cli` — ``medrank index-passages`` / ``medrank ask``.
"""
