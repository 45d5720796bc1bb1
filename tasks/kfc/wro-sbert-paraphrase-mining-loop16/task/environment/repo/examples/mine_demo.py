"""Mine the closest pairs of a random, loosely clustered embedding matrix."""

import numpy as np

from sbert_mini.util.paraphrase import paraphrase_mining_embeddings


def main():
    rng = np.random.default_rng(7)
    centers = rng.standard_normal((6, 24))
    labels = rng.integers(0, len(centers), size=60)
    emb = (centers[labels] + 0.2 * rng.standard_normal((60, 24))).astype(np.float32)
    for score, i, j in paraphrase_mining_embeddings(emb, top_k=4, max_pairs=10):
        print("%.6f  %3d %3d  (clusters %d/%d)" % (score, i, j, labels[i], labels[j]))


if __name__ == "__main__":
    main()
