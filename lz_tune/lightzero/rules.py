"""What becomes of each LightZero config key: the table.

Keys are LightZero's own dotted names as they appear in a config file: ``env.*`` and
``policy.*`` of ``main_config``, ``exp_name``, and ``create_config.*``. Each has one
:class:`Rule`:

* ``to(key)``: the value goes to our config key (through a converter where units or spellings
  differ);
* ``combined(...)``: read together with other keys by one of the combiners in
  :mod:`lz_tune.lightzero.mapping` (the policy type, the env id, image settings, supports, ...);
* ``no_effect(why)``: LightZero uses it for something that cannot change training here (logging,
  checkpoint cadence, devices of LightZero's own networks, env managers, values lz-tune reads
  from the env); named in one ``note:`` line;
* ``differs(what)``: a LightZero feature lz-tune does not implement; when the file switches it on
  (a value outside ``inert``) the run trains without it and a ``warning:`` line says so and what
  runs instead (``group="network"``: a detail of LightZero's own network code);
* ``unsupported(why)``: a setting that would make the experiment one lz-tune cannot run; any
  value outside ``inert`` is an error naming the key.

A key missing from the table (a typo, a feature from a newer LightZero) is an error naming it.
:data:`LIGHTZERO_DEFAULTS` holds LightZero's defaults where they differ from ours, per policy
type: a key the file leaves out gets LightZero's value, as LightZero itself would run it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional

from lz_tune.config import ConfigError
from lz_tune.policy_registry import POLICY_TYPES

__all__ = ["Rule", "RULES", "PREFIX_RULES", "LIGHTZERO_DEFAULTS", "rule_for", "UNIZERO_TYPES"]

Kind = Literal["to", "combined", "no_effect", "differs", "unsupported"]
Converter = Callable[[Any, str], Any]
"""(value, LightZero key) -> our value; raises ConfigError naming the key for a value it cannot take."""

UNIZERO_TYPES = frozenset({"unizero", "sampled_unizero"})
MUZERO_TYPES = frozenset(POLICY_TYPES) - UNIZERO_TYPES
EZ_TYPES = frozenset({"efficientzero", "sampled_efficientzero"})
SAMPLED_TYPES = frozenset({"sampled_efficientzero", "sampled_muzero", "sampled_unizero"})


@dataclass(frozen=True)
class Rule:
    """One LightZero key's fate (see the module docstring)."""

    kind: Kind
    target: str = ""
    """``to``: our dotted key."""
    convert: Optional[Converter] = None
    """``to``: value converter (None: the value as it is)."""
    why: str = ""
    """``no_effect``: why; ``differs``: what lz-tune does instead; ``unsupported``: why not."""
    inert: tuple[Any, ...] = ()
    """``differs`` / ``unsupported``: the values that ask for nothing (LightZero's 'off')."""
    types: Optional[frozenset[str]] = None
    """``to``: the policy types whose LightZero policy reads the key; for the others it is unused
    (no_effect)."""
    group: str = "feature"
    """``differs``: ``feature`` or ``network`` (a detail of LightZero's network code)."""


def to(target: str, convert: Optional[Converter] = None, types: Optional[frozenset[str]] = None) -> Rule:
    return Rule("to", target=target, convert=convert, types=types)


def combined() -> Rule:
    return Rule("combined")


def no_effect(why: str) -> Rule:
    return Rule("no_effect", why=why)


def differs(what: str, inert: tuple[Any, ...] = (False, None, 0), group: str = "feature") -> Rule:
    return Rule("differs", why=what, inert=inert, group=group)


def network(what: str, inert: tuple[Any, ...] = ()) -> Rule:
    return differs(what, inert, group="network")


def unsupported(why: str, inert: tuple[Any, ...] = (False, None, 0)) -> Rule:
    return Rule("unsupported", why=why, inert=inert)


# ---------------------------------------------------------------------------------- converters


def _choice(options: dict[Any, Any]) -> Converter:
    def convert(value: Any, key: str) -> Any:
        if value not in options:
            raise ConfigError(f"{key}: {value!r} is not supported here (lz-tune takes {sorted(map(str, options))})")
        return options[value]

    return convert


def _float(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    return float(value)


OPTIMIZERS = {
    "SGD": "sgd",
    "sgd": "sgd",
    "Adam": "adam",
    "adam": "adam",
    "AdamW": "adamw",
    "adamw": "adamw",
    "AdamW_mix_lr_wdecay": "adamw",
    "AdamW_nanoGPT": "adamw",
}
"""LightZero optimizer names -> ours. The two AdamW variants of LightZero (no weight decay on biases
and norm weights) become plain AdamW; the mapping warns (``learner.optim_type``)."""

LOG = "logging / monitoring"
CKPT = "checkpoint cadence (lz-tune checkpoints at every evaluation)"
DERIVED = "lz-tune reads it from the env or from the other keys"
LZ_RUNTIME = "how LightZero runs its own code (devices, caches, compilation, env managers)"

RULES: dict[str, Rule] = {
    # ---------------------------------------------------------------- experiment and env
    "exp_name": combined(),
    "create_config.env.type": combined(),
    "create_config.env.import_names": no_effect(LZ_RUNTIME),
    "create_config.policy.type": combined(),
    "create_config.policy.import_names": no_effect(LZ_RUNTIME),
    "env.env_id": combined(),
    "env.env_name": combined(),
    "env.continuous": combined(),
    "env.stop_value": to("evaluator.stop_value", _float),
    "env.collector_env_num": combined(),
    "env.evaluator_env_num": combined(),
    "env.n_evaluator_episode": to("evaluator.n_evaluator_episode"),
    "env.manually_discretization": unsupported("LightZero's discretised continuous envs are not available here"),
    "env.each_dim_disc_size": no_effect("used only with env.manually_discretization"),
    "env.enable_chance": unsupported("LightZero's CartPole chance wrapper is not available here"),
    "env.action_clip": no_effect("actions are always inside the env's bounds here"),
    "env.act_scale": no_effect("actions are always scaled to the env's bounds here"),
    "env.observation_shape": combined(),
    "env.obs_shape": no_effect(DERIVED),
    "env.frame_stack_num": combined(),
    "env.gray_scale": combined(),
    "env.frame_skip": to("env.frame_skip"),
    "env.episode_life": to("env.episodic_life"),
    "env.clip_rewards": to("env.clip_rewards"),
    "env.full_action_space": unsupported("lz-tune's Atari envs use the game's minimal action set"),
    "env.collect_max_episode_steps": combined(),
    "env.eval_max_episode_steps": combined(),
    "env.max_episode_steps": combined(),
    "env.render_mode_human": no_effect("rendering"),
    "env.save_replay": no_effect("rendering (use `python -m lz_tune evaluate --video`)"),
    "env.replay_path": no_effect("rendering (use `python -m lz_tune evaluate --video`)"),
    "env.save_replay_gif": no_effect("rendering (use `python -m lz_tune evaluate --video`)"),
    "env.replay_path_gif": no_effect("rendering (use `python -m lz_tune evaluate --video`)"),
    "env.env_type": no_effect(DERIVED),
    "env.channel_last": no_effect("observation memory layout"),
    "env.scale": unsupported("lz-tune's Atari observations are always scaled to [0, 1]", inert=(True,)),
    "env.warp_frame": unsupported("lz-tune's Atari frames are always resized (env.image_size)", inert=(True,)),
    "env.game_wrapper": unsupported("lz-tune's Atari envs always use the standard wrappers", inert=(True,)),
    "env.transform2string": no_effect("observation storage format"),
    # ---------------------------------------------------------------- policy: what and how big
    "policy.type": no_effect("create_config.policy.type names the policy"),
    "policy.model.model_type": combined(),
    "policy.model.continuous_action_space": no_effect(DERIVED),
    "policy.model.action_space_size": no_effect(DERIVED),
    "policy.model.observation_shape": combined(),
    "policy.model.image_channel": no_effect(DERIVED),
    "policy.model.frame_stack_num": combined(),
    "policy.model.gray_scale": combined(),
    "policy.model.collector_env_num": combined(),
    "policy.model.evaluator_env_num": combined(),
    "policy.model.self_supervised_learning_loss": combined(),
    "policy.model.categorical_distribution": unsupported(
        "lz-tune's value and reward heads are categorical", inert=(True,)
    ),
    "policy.model.num_res_blocks": to("model.num_res_blocks"),
    "policy.model.num_channels": to("model.num_channels"),
    "policy.model.downsample": to("model.downsample"),
    "policy.model.latent_state_dim": to("model.latent_dim"),
    "policy.model.reward_support_range": combined(),
    "policy.model.value_support_range": combined(),
    "policy.model.norm_type": combined(),
    "policy.model.bias": network("the value and policy heads' last layers have a bias", inert=(True,)),
    "policy.model.discrete_action_encoding_type": network("actions are one-hot encoded", inert=("one_hot",)),
    "policy.model.res_connection_in_dynamics": network("lz-tune's dynamics networks"),
    "policy.model.fc_reward_layers": network("the heads are sized by model.hidden_sizes"),
    "policy.model.fc_value_layers": network("the heads are sized by model.hidden_sizes"),
    "policy.model.fc_policy_layers": network("the heads are sized by model.hidden_sizes"),
    "policy.model.reward_head_channels": network("lz-tune's conv heads"),
    "policy.model.value_head_channels": network("lz-tune's conv heads"),
    "policy.model.policy_head_channels": network("lz-tune's conv heads"),
    "policy.model.last_linear_layer_init_zero": network("lz-tune's initialisation"),
    "policy.model.use_sim_norm": differs("no SimNorm on the latent state"),
    "policy.model.use_sim_norm_kl_loss": differs("no SimNorm KL loss"),
    "policy.model.harmony_balance": differs("fixed loss weights (no HarmonyDream balancing)"),
    "policy.model.analysis_sim_norm": no_effect(LOG),
    "policy.model.analysis_dormant_ratio": no_effect(LOG),
    "policy.model.lstm_hidden_size": to("efficientzero.lstm_hidden_size", types=EZ_TYPES),
    "policy.model.num_of_sampled_actions": to("sampled.num_samples", types=SAMPLED_TYPES),
    "policy.model.sigma_type": unsupported(
        "lz-tune's Gaussian policies learn their std (sampled.min_std / max_std bound it)", inert=("conditioned",)
    ),
    "policy.model.fixed_sigma_value": no_effect("used only with policy.model.sigma_type='fixed'"),
    "policy.model.bound_type": unsupported("continuous actions are always squashed by tanh here", inert=(None,)),
    "policy.model.chance_space_size": to("stochastic.chance_space_size", types=frozenset({"stochastic_muzero"})),
    "policy.model.context_length_init": to(
        "context.context_length_init", types=frozenset({"muzero_context", "muzero_rnn_full_obs"})
    ),
    "policy.model.context_length": no_effect("LightZero's models take context_length_init (this key is not read)"),
    "policy.model.rnn_hidden_size": to("context.rnn_hidden_size", types=frozenset({"muzero_rnn_full_obs"})),
    # UniZero's world model
    "policy.model.world_model_cfg.num_layers": to("unizero.num_layers", types=UNIZERO_TYPES),
    "policy.model.world_model_cfg.num_heads": to("unizero.num_heads", types=UNIZERO_TYPES),
    "policy.model.world_model_cfg.embed_dim": to("unizero.embed_dim", types=UNIZERO_TYPES),
    "policy.model.world_model_cfg.context_length": combined(),
    "policy.model.world_model_cfg.context_length_for_recurrent": combined(),
    "policy.model.world_model_cfg.attn_pdrop": combined(),
    "policy.model.world_model_cfg.resid_pdrop": combined(),
    "policy.model.world_model_cfg.embed_pdrop": combined(),
    "policy.model.world_model_cfg.policy_entropy_weight": to("learner.policy_entropy_weight", types=UNIZERO_TYPES),
    "policy.model.world_model_cfg.policy_loss_type": to(
        "sampled.policy_loss_type",
        _choice({"kl": "kl", "cross_entropy": "cross_entropy"}),
        types=frozenset({"sampled_unizero"}),
    ),
    "policy.model.world_model_cfg.latent_recon_loss_weight": differs("no observation reconstruction loss"),
    "policy.model.world_model_cfg.perceptual_loss_weight": differs("no perceptual loss"),
    "policy.model.world_model_cfg.open_loop_consistency_loss_weight": differs("no open-loop consistency loss"),
    "policy.model.world_model_cfg.open_loop_recurrent_loss_weight": differs("no open-loop recurrent loss"),
    "policy.model.world_model_cfg.open_loop_prefix_transitions": no_effect("used only with the open-loop losses"),
    "policy.model.world_model_cfg.rotary_emb": network("rotary positions (exact key/value caches)", inert=(True,)),
    "policy.model.world_model_cfg.rope_theta": network("rotary positions with lz-tune's base", inert=(10000,)),
    "policy.model.world_model_cfg.predict_latent_loss_type": network("the latent loss is an MSE", inert=("mse",)),
    "policy.model.world_model_cfg.attention": network("causal attention over a window", inert=("causal",)),
    "policy.model.world_model_cfg.gru_gating": network("plain residual transformer blocks"),
    "policy.model.world_model_cfg.norm_type": network("lz-tune's world model normalisation"),
    "policy.model.world_model_cfg.final_norm_option_in_obs_head": network("lz-tune's world model normalisation"),
    "policy.model.world_model_cfg.final_norm_option_in_head": network("lz-tune's world model normalisation"),
    "policy.model.world_model_cfg.final_norm_option_in_encoder": network("lz-tune's world model normalisation"),
    "policy.model.world_model_cfg.encoder_type": network("lz-tune's observation encoder"),
    "policy.model.world_model_cfg.use_normal_head": network("lz-tune's prediction heads", inert=(True,)),
    "policy.model.world_model_cfg.last_linear_layer_init_zero": network("lz-tune's initialisation"),
    "policy.model.world_model_cfg.zero_init_head_names": network("lz-tune's initialisation"),
    "policy.model.world_model_cfg.group_size": no_effect("SimNorm group size (no SimNorm here)"),
    "policy.model.world_model_cfg.max_seq_len": no_effect(DERIVED),
    "policy.model.world_model_cfg.max_cache_size": no_effect(LZ_RUNTIME),
    "policy.model.world_model_cfg.use_new_cache_manager": no_effect(LZ_RUNTIME),
    "policy.model.world_model_cfg.device": no_effect("the learner's device is learner.device"),
    "policy.model.world_model_cfg.support_size": no_effect("the supports follow policy.model.value_support_range"),
    "policy.model.world_model_cfg.use_priority": no_effect("policy.use_priority decides"),
    "policy.model.world_model_cfg.action_space_size": no_effect(DERIVED),
    "policy.model.world_model_cfg.continuous_action_space": no_effect(DERIVED),
    "policy.model.world_model_cfg.num_of_sampled_actions": no_effect("policy.model.num_of_sampled_actions decides"),
    "policy.model.world_model_cfg.sigma_type": unsupported(
        "lz-tune's Gaussian policies learn their std", inert=("conditioned",)
    ),
    "policy.model.world_model_cfg.bound_type": unsupported(
        "continuous actions are always squashed by tanh here", inert=(None,)
    ),
    "policy.model.world_model_cfg.model_type": no_effect("policy.model.model_type decides"),
    "policy.model.world_model_cfg.obs_type": no_effect(DERIVED),
    "policy.model.world_model_cfg.env_num": no_effect(DERIVED),
    "policy.model.world_model_cfg.collector_env_num": combined(),
    "policy.model.world_model_cfg.evaluator_env_num": combined(),
    "policy.model.world_model_cfg.num_simulations": no_effect("policy.num_simulations decides"),
    "policy.model.world_model_cfg.game_segment_length": no_effect("policy.game_segment_length decides"),
    "policy.model.world_model_cfg.num_unroll_steps": no_effect("policy.num_unroll_steps decides"),
    "policy.model.world_model_cfg.max_blocks": no_effect("policy.num_unroll_steps decides"),
    "policy.model.world_model_cfg.max_tokens": no_effect("2 x policy.num_unroll_steps"),
    "policy.model.world_model_cfg.tokens_per_block": unsupported(
        "one observation and one action token per step", inert=(2,)
    ),
    "policy.model.world_model_cfg.gamma": no_effect(LZ_RUNTIME),
    "policy.model.world_model_cfg.dormant_threshold": no_effect(LOG),
    "policy.model.world_model_cfg.analysis_sim_norm": no_effect(LOG),
    "policy.model.world_model_cfg.analysis_dormant_ratio": no_effect(LOG),
    "policy.model.world_model_cfg.analysis_dormant_ratio_weight_rank": no_effect(LOG),
    "policy.model.world_model_cfg.optim_type": no_effect("policy.optim_type decides"),
    "policy.model.world_model_cfg.exact_kv_window_reset": no_effect("lz-tune's key/value caches are exact windows"),
    "policy.model.world_model_cfg.rebuild_kv_window_from_tokens": no_effect(
        "lz-tune's key/value caches are exact windows"
    ),
    "policy.model.world_model_cfg.decode_loss_mode": differs("no observation decoder", inert=(None,)),
    "policy.model.world_model_cfg.moe_in_transformer": unsupported("no mixture-of-experts layers here"),
    "policy.model.world_model_cfg.multiplication_moe_in_transformer": unsupported("no mixture-of-experts layers here"),
    "policy.model.world_model_cfg.use_moe_head": unsupported("no mixture-of-experts heads here"),
    "policy.model.world_model_cfg.use_softmoe_head": unsupported("no mixture-of-experts heads here"),
    "policy.model.world_model_cfg.num_experts_in_moe_head": no_effect("used only with mixture-of-experts"),
    "policy.model.world_model_cfg.num_experts_of_moe_in_transformer": no_effect("used only with mixture-of-experts"),
    "policy.model.world_model_cfg.num_experts_per_tok": no_effect("used only with mixture-of-experts"),
    "policy.model.world_model_cfg.n_shared_experts": no_effect("used only with mixture-of-experts"),
    "policy.model.world_model_cfg.lora_r": unsupported("no LoRA adapters here"),
    "policy.model.world_model_cfg.lora_alpha": no_effect("used only with LoRA (lora_r > 0)"),
    "policy.model.world_model_cfg.lora_dropout": no_effect("used only with LoRA (lora_r > 0)"),
    "policy.model.world_model_cfg.use_task_embed": unsupported("multi-task training is not available here"),
    "policy.model.world_model_cfg.task_embed_option": no_effect("used only with multi-task training"),
    # ---------------------------------------------------------------- optimisation
    "policy.batch_size": to("learner.batch_size"),
    "policy.optim_type": to("learner.optim_type", _choice(OPTIMIZERS)),
    "policy.learning_rate": to("learner.learning_rate", _float),
    "policy.piecewise_decay_lr_scheduler": to("learner.piecewise_decay_lr_scheduler"),
    "policy.threshold_training_steps_for_final_lr": to("learner.threshold_training_steps_for_final_lr"),
    "policy.cos_lr_scheduler": differs("a constant learning rate (or the piecewise schedule), no cosine annealing"),
    "policy.total_iterations": no_effect("used only with policy.cos_lr_scheduler"),
    "policy.final_learning_rate": no_effect("used only with policy.cos_lr_scheduler"),
    "policy.weight_decay": to("learner.weight_decay", _float),
    "policy.momentum": to("learner.momentum", _float),
    "policy.grad_clip_value": to("learner.grad_clip_value", _float),
    "policy.accumulation_steps": unsupported("one optimizer step per batch", inert=(1,)),
    "policy.target_update_freq": to("learner.target_update_freq", types=MUZERO_TYPES),
    "policy.target_update_theta": to("unizero.target_momentum", types=UNIZERO_TYPES),
    "policy.target_update_freq_for_intrinsic_reward": no_effect("used only with policy.use_rnd_model"),
    "policy.value_loss_weight": combined(),
    "policy.reward_loss_weight": combined(),
    "policy.policy_loss_weight": combined(),
    "policy.ssl_loss_weight": combined(),
    "policy.policy_entropy_weight": to("learner.policy_entropy_weight", _float, types=MUZERO_TYPES),
    "policy.policy_label_smoothing": differs("no label smoothing of MuZero's policy targets"),
    "policy.label_smoothing_eps": to("unizero.label_smoothing_eps", types=frozenset({"unizero"})),  # sampled: unused
    "policy.policy_ls_eps_start": to("unizero.policy_ls_eps_start", types=UNIZERO_TYPES),
    "policy.policy_ls_eps_end": to("unizero.policy_ls_eps_end", types=UNIZERO_TYPES),
    "policy.policy_ls_eps_decay_steps": to("unizero.policy_ls_eps_decay_steps", types=UNIZERO_TYPES),
    "policy.use_continuous_label_smoothing": to("unizero.use_continuous_label_smoothing", types=UNIZERO_TYPES),
    "policy.continuous_ls_eps": to("unizero.continuous_ls_eps", types=UNIZERO_TYPES),
    "policy.use_adaptive_entropy_weight": to("unizero.use_adaptive_entropy_weight", types=UNIZERO_TYPES),
    "policy.adaptive_entropy_alpha_lr": to("unizero.adaptive_entropy_alpha_lr", types=UNIZERO_TYPES),
    "policy.adaptive_entropy_alpha_min": to("unizero.adaptive_entropy_alpha_min", types=UNIZERO_TYPES),
    "policy.adaptive_entropy_alpha_max": to("unizero.adaptive_entropy_alpha_max", types=UNIZERO_TYPES),
    "policy.target_entropy_start_ratio": to("unizero.target_entropy_start_ratio", types=UNIZERO_TYPES),
    "policy.target_entropy_end_ratio": to("unizero.target_entropy_end_ratio", types=UNIZERO_TYPES),
    "policy.target_entropy_decay_steps": to("unizero.target_entropy_decay_steps", types=UNIZERO_TYPES),
    "policy.legacy_resume_adaptive_alpha": no_effect("restoring LightZero checkpoints"),
    "policy.use_encoder_clip_annealing": to("unizero.use_encoder_clip_annealing", types=UNIZERO_TYPES),
    "policy.encoder_clip_anneal_type": to("unizero.encoder_clip_anneal_type", types=UNIZERO_TYPES),
    "policy.encoder_clip_start_value": to("unizero.encoder_clip_start_value", _float, types=UNIZERO_TYPES),
    "policy.encoder_clip_end_value": to("unizero.encoder_clip_end_value", _float, types=UNIZERO_TYPES),
    "policy.encoder_clip_anneal_steps": to("unizero.encoder_clip_anneal_steps", types=UNIZERO_TYPES),
    "policy.latent_norm_clip_threshold": to("unizero.latent_norm_clip_threshold", _float, types=UNIZERO_TYPES),
    "policy.use_head_clip": unsupported("set lz-tune's head clip keys (unizero.head_clip_*) by hand"),
    "policy.head_clip_config.enabled": unsupported("set lz-tune's head clip keys (unizero.head_clip_*) by hand"),
    "policy.head_clip_config.enabled_heads": no_effect("used only with policy.use_head_clip"),
    "policy.head_clip_config.head_configs": no_effect("used only with policy.use_head_clip"),
    "policy.head_clip_config.monitor_freq": no_effect("used only with policy.use_head_clip"),
    "policy.head_clip_config.log_freq": no_effect(LOG),
    "policy.kv_cache_clear_interval": to("unizero.kv_cache_clear_interval", types=UNIZERO_TYPES),
    "policy.monitor_norm_freq": no_effect(LOG),
    "policy.periodic_ckpt_keep_last": no_effect(CKPT),
    "policy.model.world_model_cfg.open_loop_diagnostic_batch_size": no_effect(LOG),
    "policy.model.world_model_cfg.open_loop_diagnostic_freq": no_effect(LOG),
    "policy.model.world_model_cfg.use_policy_logits_clip": differs("the policy logits are not clipped"),
    "policy.model.world_model_cfg.policy_logits_clip_min": no_effect("used only with use_policy_logits_clip"),
    "policy.model.world_model_cfg.policy_logits_clip_max": no_effect("used only with use_policy_logits_clip"),
    "policy.model.world_model_cfg.policy_logits_clip_method": no_effect("used only with use_policy_logits_clip"),
    "policy.init_w": network("lz-tune's initialisation"),
    # ---------------------------------------------------------------- replay ratio, buffer, reanalyze
    "policy.update_per_collect": to("learner.update_per_collect"),
    "policy.replay_ratio": to("learner.replay_ratio", _float),
    "policy.train_start_after_envsteps": to("learner.train_start_after_envsteps"),
    "policy.game_segment_length": to("buffer.game_segment_length"),
    "policy.num_unroll_steps": to("buffer.num_unroll_steps"),
    "policy.td_steps": to("buffer.td_steps"),
    "policy.replay_buffer_size": to("buffer.replay_buffer_size"),
    "policy.use_priority": to("buffer.use_priority"),
    "policy.priority_prob_alpha": to("buffer.priority_prob_alpha", _float),
    "policy.priority_prob_beta": to("buffer.priority_prob_beta", _float),
    "policy.use_max_priority_for_new_data": to("buffer.use_max_priority_for_new_data"),
    "policy.reanalyze_ratio": to("buffer.reanalyze_ratio", _float),
    "policy.buffer_reanalyze_freq": to("buffer.buffer_reanalyze_freq", _float),
    "policy.reanalyze_batch_size": to("buffer.reanalyze_batch_size"),
    "policy.reanalyze_partition": to("buffer.reanalyze_partition", _float),
    "policy.reanalyze_noise": combined(),
    "policy.reanalyze_search_chunk_size": no_effect(LZ_RUNTIME),
    "policy.reuse_search": differs("every value target is computed afresh (no search reuse)"),
    "policy.contextual_reanalysis": differs("reanalysis starts from the stored observation"),
    "policy.bootstrap_value_context": differs("bootstrap values start from the stored observation"),
    "policy.sample_type": unsupported("batches are sampled by transition", inert=("transition",)),
    "policy.ignore_done": differs("episode ends are kept; time limits are bootstrapped as truncations"),
    "policy.resume_buffer_min_transitions": no_effect("restoring LightZero checkpoints"),
    "policy.use_augmentation": differs("no image augmentation of the observations"),
    "policy.augmentation": no_effect("used only with policy.use_augmentation"),
    # ---------------------------------------------------------------- search and acting
    "policy.num_simulations": combined(),
    "policy.collect_num_simulations": combined(),
    "policy.eval_num_simulations": combined(),
    "policy.discount_factor": to("mcts.discount_factor", _float),
    "policy.root_dirichlet_alpha": to("mcts.root_dirichlet_alpha", _float),
    "policy.root_noise_weight": to("mcts.root_noise_weight", _float),
    "policy.pb_c_base": to("mcts.pb_c_base", _float),
    "policy.pb_c_init": to("mcts.pb_c_init", _float),
    "policy.value_delta_max": to("mcts.value_delta_max", _float),
    "policy.max_num_considered_actions": to("gumbel.max_num_considered_actions", types=frozenset({"gumbel_muzero"})),
    "policy.lstm_horizon_len": to("efficientzero.lstm_horizon_len", types=EZ_TYPES),
    "policy.policy_loss_type": to(
        "sampled.policy_loss_type",
        _choice({"cross_entropy": "cross_entropy", "KL": "kl", "kl": "kl"}),
        types=SAMPLED_TYPES - {"sampled_unizero"},
    ),
    "policy.normalize_prob_of_sampled_actions": differs("child priors are lz-tune's (docs/policy_types.md)"),
    "policy.use_ture_chance_label_in_chance_encoder": to(
        "stochastic.use_true_chance_label", types=frozenset({"stochastic_muzero"})
    ),
    "policy.afterstate_policy_loss_weight": to(
        "stochastic.chance_loss_weight", _float, types=frozenset({"stochastic_muzero"})
    ),
    "policy.afterstate_value_loss_weight": to(
        "stochastic.afterstate_value_loss_weight", _float, types=frozenset({"stochastic_muzero"})
    ),
    "policy.commitment_loss_weight": to(
        "stochastic.commitment_loss_weight", _float, types=frozenset({"stochastic_muzero"})
    ),
    "policy.analyze_chance_distribution": no_effect(LOG),
    "policy.manual_temperature_decay": to("collector.manual_temperature_decay"),
    "policy.threshold_training_steps_for_final_temperature": to(
        "collector.threshold_training_steps_for_final_temperature"
    ),
    "policy.fixed_temperature_value": to("collector.temperature", _float),
    "policy.eps.eps_greedy_exploration_in_collect": combined(),
    "policy.eps.type": combined(),
    "policy.eps.start": combined(),
    "policy.eps.end": combined(),
    "policy.eps.decay": combined(),
    "policy.random_collect_episode_num": differs("no random-policy episodes before training"),
    "policy.collect_with_pure_policy": unsupported("collection always searches"),
    "policy.n_episode": combined(),
    "policy.num_segments": combined(),
    "policy.collector_env_num": combined(),
    "policy.evaluator_env_num": combined(),
    "policy.eval_freq": to("evaluator.eval_freq"),
    "policy.gray_scale": combined(),
    # ---------------------------------------------------------------- what LightZero runs on
    "policy.cuda": combined(),
    "policy.multi_gpu": unsupported("data-parallel learning is learner.num_workers here"),
    "policy.model_path": unsupported(
        "LightZero checkpoints cannot be loaded (start from lz-tune's own checkpoints with --resume)", inert=(None,)
    ),
    "policy.env_type": unsupported(
        "board games (two-player search) are not available here", inert=("not_board_games",)
    ),
    "policy.battle_mode": no_effect("used only by board games"),
    "policy.action_type": no_effect("legal actions come from the env's action mask"),
    "policy.sampled_algo": no_effect("the policy type decides"),
    "policy.gumbel_algo": no_effect("the policy type decides"),
    "policy.mcts_ctree": no_effect("LightZero's C++ or Python tree: the same search"),
    "policy.use_rnd_model": unsupported("no random-network-distillation bonus here"),
    "policy.use_task_exploitation_weight": unsupported("multi-task training is not available here"),
    "policy.transform2string": no_effect("observation storage format"),
    "policy.use_wandb": no_effect(LOG),
    "policy.monitor_extra_statistics": no_effect(LOG),
    "policy.analysis_sim_norm": no_effect(LOG),
    "policy.analysis_dormant_ratio": no_effect(LOG),
    "policy.cal_dormant_ratio": no_effect(LOG),
    "policy.calculate_dormant_ratio": no_effect(LOG),
    "policy.dormant_threshold": no_effect(LOG),
    "policy.gradient_diagnostic_freq": no_effect(LOG),
    "policy.use_enhanced_policy_monitoring": no_effect(LOG),
    "policy.eval_offline": no_effect(CKPT),
    "policy.save_ckpt_in_eval": no_effect(CKPT),
    "policy.torch_compile": no_effect(LZ_RUNTIME),
    "policy.empty_cuda_cache_on_cache_reset": no_effect(LZ_RUNTIME),
}

PREFIX_RULES: dict[str, Rule] = {
    "policy.learn.": no_effect(CKPT),
    "policy.model.learn.": no_effect(CKPT),
    "env.manager.": no_effect(LZ_RUNTIME),
    "create_config.env_manager.": no_effect(LZ_RUNTIME),
    "policy.async_pipeline.": combined(),
}
"""Rules for every key under a prefix (checked when a key has no rule of its own)."""


def rule_for(key: str) -> Optional[Rule]:
    """The rule of LightZero key ``key`` (exact, else by prefix), or None for an unknown key."""
    if key in RULES:
        return RULES[key]
    return next((r for prefix, r in PREFIX_RULES.items() if key.startswith(prefix)), None)


# ---------------------------------------------------------------------------------- defaults

_ALL = "*"
LIGHTZERO_DEFAULTS: dict[str, dict[str, Any]] = {
    # key: {policy type or "*": LightZero's default}, where it differs from lz-tune's or matters
    "policy.use_priority": {
        "muzero": False,
        "muzero_context": False,
        "efficientzero": False,
        "gumbel_muzero": True,
        "sampled_efficientzero": True,
        "sampled_muzero": False,
        "stochastic_muzero": True,
        "muzero_rnn_full_obs": True,
        "unizero": False,
        "sampled_unizero": False,
    },
    "policy.use_max_priority_for_new_data": {_ALL: False, "stochastic_muzero": True},
    "policy.model.self_supervised_learning_loss": {
        "muzero": False,
        "muzero_context": False,
        "efficientzero": True,
        "gumbel_muzero": False,
        "sampled_efficientzero": True,
        "sampled_muzero": True,
        "stochastic_muzero": False,
        "muzero_rnn_full_obs": True,
        "unizero": True,
        "sampled_unizero": True,
    },
    "policy.ssl_loss_weight": {
        _ALL: 2.0,
        "muzero": 0.0,
        "muzero_context": 0.0,
        "gumbel_muzero": 0.0,
        "stochastic_muzero": 0.0,
    },
    "policy.policy_entropy_weight": {
        _ALL: 0.0,
        "muzero": 5e-3,
        "muzero_context": 5e-3,
        "sampled_efficientzero": 5e-3,
        "sampled_muzero": 5e-3,
    },
    "policy.optim_type": {
        _ALL: "SGD",
        "sampled_efficientzero": "AdamW",
        "sampled_muzero": "AdamW",
        "stochastic_muzero": "Adam",
        "unizero": "AdamW",
        "sampled_unizero": "AdamW",
    },
    "policy.learning_rate": {
        _ALL: 0.2,
        "sampled_efficientzero": 1e-4,
        "sampled_muzero": 1e-4,
        "unizero": 1e-4,
        "sampled_unizero": 1e-4,
    },
    "policy.piecewise_decay_lr_scheduler": {
        _ALL: True,
        "sampled_efficientzero": False,
        "sampled_muzero": False,
        "stochastic_muzero": False,
        "unizero": False,
        "sampled_unizero": False,
    },
    "policy.game_segment_length": {"unizero": 400, "sampled_unizero": 400},
    "policy.num_unroll_steps": {"unizero": 10, "sampled_unizero": 10},
    "policy.grad_clip_value": {"unizero": 20.0, "sampled_unizero": 5.0},
    "policy.threshold_training_steps_for_final_temperature": {"unizero": 50_000},
    "policy.eval_freq": {"unizero": 5000, "sampled_unizero": 2000},
    "policy.collect_num_simulations": {"unizero": 25},
    "policy.eval_num_simulations": {"unizero": 50},
    "policy.reanalyze_noise": {_ALL: True, "muzero_rnn_full_obs": False, "unizero": False, "sampled_unizero": False},
    "policy.max_num_considered_actions": {"gumbel_muzero": 4},
    "policy.model.lstm_hidden_size": {"efficientzero": 512, "sampled_efficientzero": 512},
    "policy.model.chance_space_size": {"stochastic_muzero": 2},
    "policy.model.rnn_hidden_size": {"muzero_rnn_full_obs": 512},
    "policy.model.context_length_init": {"muzero_context": 5, "muzero_rnn_full_obs": 5},
    "policy.model.latent_state_dim": {_ALL: 256, "unizero": None, "sampled_unizero": None},
    "policy.model.value_support_range": {
        _ALL: (-300.0, 301.0, 1.0),
        "unizero": (-50.0, 51.0, 1.0),
        "sampled_unizero": (-50.0, 51.0, 1.0),
    },
    "policy.model.reward_support_range": {
        _ALL: (-300.0, 301.0, 1.0),
        "unizero": (-50.0, 51.0, 1.0),
        "sampled_unizero": (-50.0, 51.0, 1.0),
    },
    "policy.model.world_model_cfg.embed_dim": {"unizero": 768, "sampled_unizero": 768},
    "policy.model.world_model_cfg.num_heads": {"unizero": 8, "sampled_unizero": 8},
    "policy.model.world_model_cfg.attn_pdrop": {"unizero": 0.1, "sampled_unizero": 0.1},
    "policy.model.world_model_cfg.resid_pdrop": {"unizero": 0.1, "sampled_unizero": 0.1},
    "policy.model.world_model_cfg.embed_pdrop": {"unizero": 0.1, "sampled_unizero": 0.1},
    "policy.model.world_model_cfg.policy_entropy_weight": {"unizero": 5e-3, "sampled_unizero": 5e-3},
    "policy.model.world_model_cfg.policy_loss_type": {"sampled_unizero": "kl"},
    "policy.model.world_model_cfg.rotary_emb": {"unizero": False, "sampled_unizero": False},
}
"""LightZero's defaults (its policies' ``config`` at the commit the test data comes from) for keys
whose lz-tune default is different, or that switch on a feature lz-tune lacks; applied to a key
the file leaves out. Only the keys listed here: for every other key LightZero's default is
lz-tune's."""


def lightzero_default(key: str, policy_type: str) -> Any:
    """LightZero's default of ``key`` for ``policy_type`` (KeyError: none listed)."""
    per_type = LIGHTZERO_DEFAULTS[key]
    if policy_type in per_type:
        return per_type[policy_type]
    return per_type[_ALL]
