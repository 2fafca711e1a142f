"""Fingerprint of a policy type's arithmetic: the first visit counts, losses and priorities of a
tiny, fully seeded sync run. ``tests/data/<type>_fingerprint.json`` holds values recorded with
``python tests/fingerprint.py muzero`` BEFORE a refactor; ``test_fingerprint.py`` checks that the
code still reproduces them."""

from __future__ import annotations

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tests.conftest import CARTPOLE_ZOO, REPO_ROOT, TINY_OVERRIDES  # noqa: E402

NUM_UPDATES = 4


def fingerprint(policy_type: str = "muzero", *extra: str) -> dict:
    """Visit distributions of the first collect step, then logs and priorities of the first
    NUM_UPDATES learner updates of a seeded sync run (one thread)."""
    import torch

    from lz_tune.config_loader import load_config_module
    from lz_tune.pipeline import Driver

    torch.set_num_threads(1)
    cfg = load_config_module(os.path.join(REPO_ROOT, CARTPOLE_ZOO)).with_overrides(
        list(TINY_OVERRIDES)
        + [
            f"policy_type={policy_type}",
            f"max_train_iter={NUM_UPDATES}",
            "learner.train_start_after_envsteps=0",
            "mcts.num_simulations=9",
            "buffer.reanalyze_ratio=0.25",
            # the zoo config's values when the fingerprint was recorded (the
            # zoo's CartPole config changed since; the fingerprint guards arithmetic)
            "learner.learning_rate=0.003",
            "learner.ssl_loss_weight=2.0",
            "model.projection_hidden_dim=256",
            *extra,
        ]
    )
    driver = Driver(cfg, print_fn=None)
    record: dict = {"visits": [], "updates": []}
    collector = driver.backend.collectors[0]
    act = collector.policy.act

    def recording_act(batch, **kw):
        out = act(batch, **kw)
        if len(record["visits"]) < 2:
            record["visits"].append(
                np.asarray(out.policy_target if hasattr(out, "policy_target") else out.visit_distribution).tolist()
            )
        return out

    collector.policy.act = recording_act
    learn = driver.learner.learn

    def recording_learn(batch, *args, **kw):
        logs, prio = learn(batch, *args, **kw)
        record["updates"].append(
            {
                "logs": {k: float(v) for k, v in logs.items() if k.startswith("loss/")},
                "priorities": np.asarray(prio, np.float64).tolist(),
            }
        )
        return logs, prio

    driver.learner.learn = recording_learn
    driver.run()
    driver.close()
    return record


if __name__ == "__main__":
    kind = sys.argv[1] if len(sys.argv) > 1 else "muzero"
    out = fingerprint(kind)
    path = os.path.join(HERE, "data", f"{kind}_fingerprint.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(path, len(out["updates"]), "updates")
