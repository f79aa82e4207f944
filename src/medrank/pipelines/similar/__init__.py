"""Similar medical question retrieval: BM25 recall + the Siamese Text Matching Transformer (STMT).

Implements K. Wang et al., "Medical Question Retrieval Based on Siamese Neural
Network and Transfer Learning Method" (DASFAA 2019) on the medrank core:

* :mod:`.text` — tokenisation (Chinese characters / jieba, English words), the
  vocabulary and CBOW word2vec embeddings;
* :mod:`.models` — STMT (+ self-only / inter-only ablations), Siamese BiLSTM,
  Transformer, ESIM, logistic regressions;
* :mod:`.losses` — AM-softmax, softmax classification, pair cross-entropy;
* :mod:`.matchers` — trainable matchers with save/load (incl. a cross-encoder);
* :mod:`.training` — pair training and AM-softmax transfer pre-training;
* :mod:`.experiment` — the configured experiment behind ``medrank train``;
* :mod:`.pairs` — training pairs from unlabelled questions (``medrank make-pairs``);
* :mod:`.retrieval` — BM25 top-20 recall + matcher re-ranking (``medrank similar``);
* :mod:`.evaluation` — accuracy / precision / recall / F1 / NDCG@3.
"""

from medrank.pipelines.similar.evaluation import PAIR_METRICS, pair_metrics
from medrank.pipelines.similar.matchers import (
    MODEL_KINDS,
    CrossEncoderMatcher,
    LinearMatcher,
    NeuralMatcher,
    PairMatcher,
    load_matcher,
)
from medrank.pipelines.similar.pairs import PairGenerationConfig, generate_pairs
from medrank.pipelines.similar.retrieval import SimilarQuestion, SimilarQuestionSearcher
from medrank.pipelines.similar.text import (
    QuestionTokenizer,
    TokenizerSpec,
    Vocabulary,
    Word2VecConfig,
    train_word2vec,
)

__all__ = [
    "MODEL_KINDS",
    "PAIR_METRICS",
    "CrossEncoderMatcher",
    "LinearMatcher",
    "NeuralMatcher",
    "PairGenerationConfig",
    "PairMatcher",
    "QuestionTokenizer",
    "SimilarQuestion",
    "SimilarQuestionSearcher",
    "TokenizerSpec",
    "Vocabulary",
    "Word2VecConfig",
    "generate_pairs",
    "load_matcher",
    "pair_metrics",
    "train_word2vec",
]
