"""MuZero's arithmetic is unchanged by refactors: the first visit distributions, losses and
priorities of a seeded tiny run match the values recorded before the policy-family seam
(tests/data/muzero_fingerprint.json, written by ``python tests/fingerprint.py muzero``)."""

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
        for key in w["logs"]:
            np.testing.assert_allclose(g["logs"][key], w["logs"][key], rtol=1e-4, atol=1e-5, err_msg=f"{step} {key}")
        np.testing.assert_allclose(g["priorities"], w["priorities"], rtol=1e-4, atol=1e-5, err_msg=str(step))
