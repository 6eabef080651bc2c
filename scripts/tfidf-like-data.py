#!/usr/bin/env python3
# Text-like multiclass data as libsvm files (a stand-in for a user's own tf-idf file): 50 classes, each
# a topic of 300 words drawn from a 20,000-word Zipf vocabulary; a document has 80-400 tokens, 7% from
# its class's topic and the rest from the vocabulary; features are (1 + log tf) * idf with the
# training set's idf, rows L2-normalised (about 186 non-zeros a row). Python's standard library only.
#   scripts/tfidf-like-data.py TRAIN.svm TEST.svm   (30,000 and 10,000 rows; seed 7)
import math, random, sys
if len(sys.argv) != 3:
    sys.exit("usage: tfidf-like-data.py TRAIN.svm TEST.svm")
V, J, NTR, NTE = 20000, 50, 30000, 10000
rng = random.Random(7)
perm = list(range(V)); rng.shuffle(perm)
bg = [0.0] * V
for r, w in enumerate(perm): bg[w] = 1.0 / (r + 10) ** 1.1
bgcum = []; s = 0
for x in bg: s += x; bgcum.append(s)
words = list(range(V))
topics = []
for j in range(J):
    tw = rng.choices(words, cum_weights=bgcum, k=300)
    wts = [rng.expovariate(1.0) for _ in tw]
    c = []; s = 0
    for x in wts: s += x; c.append(s)
    topics.append((tw, c))
def doc(j):
    L = rng.randint(80, 400); k = sum(1 for _ in range(L) if rng.random() < 0.07)
    toks = rng.choices(words, cum_weights=bgcum, k=L - k) + rng.choices(topics[j][0], cum_weights=topics[j][1], k=k)
    tf = {}
    for t in toks: tf[t] = tf.get(t, 0) + 1
    return tf
tr = [(j, doc(j)) for j in (rng.randrange(J) for _ in range(NTR))]
te = [(j, doc(j)) for j in (rng.randrange(J) for _ in range(NTE))]
df = [0] * V
for _, d in tr:
    for t in d: df[t] += 1
idf = [math.log((1 + NTR) / (1 + x)) + 1 for x in df]
def write(path, rows):
    with open(path, "w") as f:
        for j, d in rows:
            feats = sorted((t, (1 + math.log(c)) * idf[t]) for t, c in d.items())
            n = math.sqrt(sum(v * v for _, v in feats))
            f.write(str(j) + " " + " ".join("%d:%.6g" % (t + 1, v / n) for t, v in feats) + "\n")
write(sys.argv[1], tr); write(sys.argv[2], te)
