"""The ``unizero`` config section: UniZero's transformer world model (``cfg.unizero``, overrides
``unizero.<key>=...``). Owned by the policy type ``unizero`` (also read by ``sampled_unizero``): its
entry in :mod:`lz_tune.policy_registry` names this class, and every :class:`lz_tune.config.Config`
holds it. A module apart from :mod:`lz_tune.algos.unizero` so that a config is checked without
importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from lz_tune.config import Section

__all__ = ["UniZeroConfig"]


@dataclass(frozen=True)
class UniZeroConfig(Section):
    """UniZero (``policy_type=unizero``): a transformer world model over observation and action
    tokens with per-env key/value caches (Pu et al. 2024). Ignored by other types. The loss
    weights are the learner's (``learner.policy_loss_weight``, ``value_loss_weight``,
    ``reward_loss_weight``, ``policy_entropy_weight``; ``ssl_loss_weight`` weighs the latent
    consistency MSE)."""

    section_name = "unizero"
    embed_dim: int = 256
    """E: width of every token (observation latents included)."""
    num_layers: int = 2
    """Transformer blocks."""
    num_heads: int = 4
    """Attention heads (E / num_heads must be even: rotary positions)."""
    infer_context_length: int = 4
    """H: real env steps of context. Every token attends to itself and the 2H - 1 tokens before
    it (the window C = 2H), in training, collection, evaluation and search alike."""
    kv_cache_clear_interval: int = 2000
    """Clear an env's key/value cache (restart its context from the current observation) every
    this many of its env steps; 0 disables the periodic clearing (the window keeps the cache
    bounded either way)."""
    dropout: float = 0.0
    """Transformer dropout in training (the original uses 0.1)."""
    search_cache: bool = True
    """Search with per-node key/value windows (one token step per model call). False: the
    uncached reference, every simulation recomputes each leaf's whole path of tokens from its
    root (same results; for tests and ``benchmarks/mcts_speed.py``)."""
    target_momentum: float = 0.05
    """tau of the momentum target network, updated after every update: theta_target <-
    (1 - tau) theta_target + tau theta. 1: a hard copy every update."""
    policy_ls_eps_start: float = 0.0
    """Policy label smoothing at train_iter 0 (target (1 - eps) pi + eps / A); 0: off (the
    schedule runs only when this is > 0, as LightZero's)."""
    policy_ls_eps_end: float = 0.0
    """Policy label smoothing after policy_ls_eps_decay_steps updates (linear in train_iter)."""
    policy_ls_eps_decay_steps: int = 50_000
    """Updates over which the label smoothing goes from start to end."""
    label_smoothing_eps: Optional[float] = None
    """Label smoothing of the value and reward targets: the two-hot target over the K support
    bins becomes (1 - eps) two_hot + eps / K. None: LightZero's default of the type
    (unizero 0.1, sampled_unizero 0: LightZero's sampled UniZero does not smooth)."""
    use_continuous_label_smoothing: bool = False
    """Smooth the policy target by continuous_ls_eps at every update instead of the
    policy_ls_eps_* schedule."""
    continuous_ls_eps: float = 0.05
    """The fixed policy label smoothing of use_continuous_label_smoothing."""
    use_adaptive_entropy_weight: bool = False
    """Learn the policy entropy weight alpha (it replaces learner.policy_entropy_weight): after
    every forward pass, one Adam step on log alpha with the loss log_alpha * (H - H_target), H
    the batch's mean policy entropy per valid unroll step, H_target = ln(A) * ratio(train_iter)
    (target_entropy_*). alpha starts at 1 and is kept in [adaptive_entropy_alpha_min, _max]; it
    and its optimizer are saved in checkpoints. unizero only (discrete actions)."""
    adaptive_entropy_alpha_lr: float = 1e-3
    """Adam learning rate of log alpha (LightZero's Atari config uses 1e-4)."""
    adaptive_entropy_alpha_min: float = 1e-4
    """Lower bound of the adaptive alpha."""
    adaptive_entropy_alpha_max: float = 10.0
    """Upper bound of the adaptive alpha."""
    target_entropy_start_ratio: float = 0.98
    """Target entropy at train_iter 0, as a fraction of the maximum ln(A)."""
    target_entropy_end_ratio: float = 0.05
    """Target entropy after target_entropy_decay_steps updates (linear in train_iter; the
    LightZero's Atari config uses 0.7)."""
    target_entropy_decay_steps: int = 500_000
    """Updates over which the target entropy ratio goes from start to end (Atari: 100000)."""
    use_encoder_clip_annealing: bool = False
    """Encoder latent-norm clip with a threshold annealed in train_iter from
    encoder_clip_start_value to encoder_clip_end_value (off: the fixed
    latent_norm_clip_threshold). When the largest L2 norm of this update's observation latents
    exceeds the threshold, the encoder's final LayerNorm (weight and bias) is scaled by
    threshold / norm, after the backward pass and before the optimizer step."""
    encoder_clip_anneal_type: Literal["cosine", "linear"] = "cosine"
    """Shape of the encoder clip threshold's annealing."""
    encoder_clip_start_value: float = 30.0
    """Encoder clip threshold at train_iter 0 (annealing)."""
    encoder_clip_end_value: float = 10.0
    """Encoder clip threshold from encoder_clip_anneal_steps updates on (annealing)."""
    encoder_clip_anneal_steps: int = 100_000
    """Updates over which the encoder clip threshold anneals."""
    latent_norm_clip_threshold: float = 0.0
    """Fixed encoder latent-norm clip threshold when use_encoder_clip_annealing is off; 0: no
    clipping."""
    head_clip_heads: tuple[Literal["policy", "value", "reward", "observations"], ...] = ()
    """Heads whose outputs are clipped (LightZero's head clip; empty: off). When the largest
    |output| of a head in this update exceeds the head clip threshold, every parameter of that
    head is scaled by threshold / max, after the backward pass and before the optimizer step
    (``observations``: the next-latent head). One schedule (head_clip_*) for all the heads."""
    head_clip_use_annealing: bool = True
    """Anneal the head clip threshold from head_clip_start_value to head_clip_end_value (off:
    the fixed head_clip_threshold)."""
    head_clip_anneal_type: Literal["cosine", "linear"] = "cosine"
    """Shape of the head clip threshold's annealing."""
    head_clip_start_value: float = 30.0
    """Head clip threshold at train_iter 0 (annealing)."""
    head_clip_end_value: float = 10.0
    """Head clip threshold from head_clip_anneal_steps updates on (annealing)."""
    head_clip_anneal_steps: int = 500_000
    """Updates over which the head clip threshold anneals."""
    head_clip_threshold: float = 15.0
    """Fixed head clip threshold when head_clip_use_annealing is off."""
    head_clip_monitor_freq: int = 1
    """Head clipping runs at the updates whose train_iter is a multiple of this."""
    monitor_norm_freq: int = 5000
    """Every this many updates (and at the first update of a process or after a restore):
    parameter and gradient norms per module, transformer-output, logit and latent statistics,
    logged (``norm/*``, ``grad/*``, ``logits/*``, ``embeddings/*``, ``stability/*``) and
    repeated in every update's logs until the next check; 0 disables it."""

    def validate(self) -> None:
        self.require_positive(
            "embed_dim", "num_layers", "num_heads", "infer_context_length", "policy_ls_eps_decay_steps"
        )
        self.require_non_negative("kv_cache_clear_interval")
        self.require(0.0 <= self.dropout < 1.0, "dropout", "must be in [0, 1)")
        self.require(0.0 < self.target_momentum <= 1.0, "target_momentum", "must be in (0, 1]")
        self.require(
            self.label_smoothing_eps is None or 0.0 <= self.label_smoothing_eps < 1.0,
            "label_smoothing_eps",
            "must be None or in [0, 1)",
        )
        self.require_fraction(
            "policy_ls_eps_start",
            "policy_ls_eps_end",
            "continuous_ls_eps",
            "target_entropy_start_ratio",
            "target_entropy_end_ratio",
        )
        self.require_positive(
            "adaptive_entropy_alpha_lr",
            "adaptive_entropy_alpha_min",
            "adaptive_entropy_alpha_max",
            "target_entropy_decay_steps",
            "encoder_clip_start_value",
            "encoder_clip_end_value",
            "encoder_clip_anneal_steps",
            "head_clip_start_value",
            "head_clip_end_value",
            "head_clip_anneal_steps",
            "head_clip_threshold",
            "head_clip_monitor_freq",
        )
        self.require(
            self.adaptive_entropy_alpha_min <= self.adaptive_entropy_alpha_max,
            "adaptive_entropy_alpha_min",
            f"must be <= unizero.adaptive_entropy_alpha_max={self.adaptive_entropy_alpha_max}",
        )
        self.require_non_negative("latent_norm_clip_threshold", "monitor_norm_freq")
        self.require(
            self.embed_dim % self.num_heads == 0 and (self.embed_dim // self.num_heads) % 2 == 0,
            "embed_dim",
            f"must split into unizero.num_heads={self.num_heads} heads of even width",
        )
