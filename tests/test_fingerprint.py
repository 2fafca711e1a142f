"""MuZero's arithmetic is unchanged by refactors: the first visit distributions, losses and
priorities of a seeded tiny run match the values recorded before the policy-family seam
(tests/data/muzero_fingerprint.json, written by ``python tests/fingerprint.py muzero``).

The first update (recorded weights, one forward and backward) must match to 1e-4. Later updates
are compared at 1e-2: after an Adam step, a parameter whose gradient is float noise moves by
about the learning rate in either direction, so CPUs whose BLAS sums in another order (AVX-512
vs AMX kernels of MKL) drift apart by ~3e-3 in the SSL loss from the second update on; a wrong
loss term, step size or target copy moves these logs by far more."""

from __future__ import annotations

import json
import os

import numpy as np

from tests.fingerprint import NUM_UPDATES, fingerprint

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def test_muzero_fingerprint_is_reproduced():
    with open(os.path.join(DATA, "muzero_fingerprint.json")) as f:
        want = json.load(f)
    got = fingerprint("muzero")
    assert len(got["updates"]) == NUM_UPDATES
    np.testing.assert_allclose(got["visits"], want["visits"], rtol=0, atol=1e-6)
    for step, (g, w) in enumerate(zip(got["updates"], want["updates"])):
        assert g["logs"].keys() == w["logs"].keys(), step
        rtol, atol = (1e-4, 1e-5) if step == 0 else (1e-2, 1e-4)
        for key in w["logs"]:
            np.testing.assert_allclose(g["logs"][key], w["logs"][key], rtol=rtol, atol=atol, err_msg=f"{step} {key}")
        np.testing.assert_allclose(g["priorities"], w["priorities"], rtol=rtol, atol=atol, err_msg=str(step))
