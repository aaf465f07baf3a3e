"""Writes OUTDIR/x.npy (512 x 16 float32, uniform in [-1, 1]) and OUTDIR/y.npy (int32, the
argmax of a fixed random linear map to 4 classes): the synthetic set of the data-parallel
shell tests (tests/gpu/dist.sh, tests/netns.sh).  Usage: write_split.py OUTDIR"""
import sys

import numpy as np

rng = np.random.default_rng(7)
x = rng.uniform(-1, 1, (512, 16)).astype(np.float32)
y = np.argmax(x @ rng.normal(size=(16, 4)), axis=1).astype(np.int32)
np.save(sys.argv[1] + "/x.npy", x)
np.save(sys.argv[1] + "/y.npy", y)
