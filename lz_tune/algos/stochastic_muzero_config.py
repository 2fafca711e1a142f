"""The ``stochastic`` config section: Stochastic MuZero's afterstates and chance codes
(``cfg.stochastic``, overrides ``stochastic.<key>=...``). Owned by the policy type
``stochastic_muzero``: its entry in :mod:`lz_tune.policy_registry` names this class, and every
:class:`lz_tune.config.Config` holds it. A module apart from :mod:`lz_tune.algos.stochastic_muzero`
so that a config is checked without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lz_tune.config import Section

__all__ = ["StochasticConfig"]


@dataclass(frozen=True)
class StochasticConfig(Section):
    """Stochastic MuZero (``policy_type=stochastic_muzero``): afterstates and chance outcomes
    in the model and the tree (Antonoglou et al. 2022). Ignored by other types."""

    section_name = "stochastic"
    chance_space_size: int = 32
    """C: chance codes of an afterstate (learned codes: the chance encoder's one-hot width;
    true labels: at least the env's number of chance outcomes, 32 for 2048)."""
    use_true_chance_label: bool = False
    """Train with the env's true chance outcome (``StepResult.info_columns['chance_outcome']``,
    stored per step) as the dynamics code and the sigma target instead of the chance
    encoder's code. Needs an env that reports chance outcomes."""
    chance_loss_weight: float = 1.0
    """Weight of the cross-entropy of the afterstate's chance distribution sigma against the
    code that happened (the encoder's one-hot, detached; or the true label)."""
    afterstate_value_loss_weight: float = 0.25
    """Weight of the afterstate value Q's cross-entropy against the value target z_k."""
    commitment_loss_weight: float = 1.0
    """Weight of the commitment term ||softmax(c_e) - sg(one_hot(argmax c_e))||^2 that pulls
    the chance encoder's distribution to its own one-hot code (learned codes only)."""
    code_usage_loss_weight: float = 0.0
    """Weight of the code-usage term ``log C - H(mean over the batch of softmax(c_e))`` (learned
    codes only; 0 when a batch uses its codes evenly). With the commitment term (each code
    confident) it maximises the information the code carries about the transition, as in
    information-maximising clustering. Without it the encoder can settle on one code for every
    transition, and the model is then a deterministic one (2048: 1 of 32 codes in use after 500
    updates, benchmarks/README.md). 0 is the paper's loss."""
    q_normalization: Literal["tree", "node"] = "tree"
    """Q normalisation at decision nodes: ``tree`` (min-max over the whole tree, MuZero) or
    ``node`` (per node, as mctx)."""

    def validate(self) -> None:
        self.require_positive("chance_space_size")
        self.require_non_negative(
            "chance_loss_weight", "afterstate_value_loss_weight", "commitment_loss_weight", "code_usage_loss_weight"
        )
