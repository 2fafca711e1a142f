"""Batched pUCT search over the TRUE states of a game (AlphaZero): every node holds a game state,
children are made by the game's own rules, terminal nodes are valued by the game's outcome, and
a network only gives the prior and the value of each new non-terminal leaf.

Used by ``policy_type=alphazero`` (:mod:`lz_tune.algos.alphazero`) on ``openspiel:<game>`` envs;
the states are ``pyspiel.State`` objects (anything with ``clone``, ``apply_action``,
``legal_actions``, ``current_player``, ``is_terminal`` and ``rewards`` works).

One search runs B trees at once (one per env): each simulation descends every tree to a leaf,
the non-terminal new leaves of all trees go through ONE ``evaluate`` call (the network, batched
over the trees), then every tree backs its leaf value up. It is plain Python (a node is an object
with per-child lists): 50-90 us per tree and simulation with the network call on a busy 2-core
box (see docs/board_games.md for measured costs per move).

Rules of the tree:

- **Legal moves everywhere**: a node's children are its state's ``legal_actions()``, at the root
  and below it (unlike MuZero's search, whose interior nodes allow every action); the prior is
  the softmax of the network's logits over those moves.
- **Values** are from the view of the player to move at the node. Taking action ``a`` at node
  ``s`` (mover ``p``) gives ``Q(s, a) = r + gamma * sign * V(s')`` where ``r`` is ``p``'s reward
  for the move (``state.rewards()[p]`` after it: in games scored at the end, ``state.returns()[p]``
  when ``s'`` is terminal and 0 before), ``V(s')`` is 0 at a terminal ``s'`` and the search value
  of ``s'`` otherwise, and ``sign`` is +1 when ``p`` is also to move at ``s'``, -1 when the other
  player is (zero-sum two-player backup, read from the game: no alternation is assumed).
  A node counts its own evaluation as one visit: ``V(s) = (v_net(s) + sum of backed-up returns) /
  N(s)`` (mctx, as :mod:`lz_tune.mcts.backup`).
- **Selection** (pUCT, MuZero's constants): ``argmax_a Q_hat(s, a) + c(s) P(s, a) sqrt(N(s)) /
  (1 + N(s, a))`` with ``c(s) = log((N(s) + c2 + 1) / c2) + c1``. ``Q_hat`` is Q scaled to [0, 1]
  by the game's utility range (``q_normalization="game"``: MuZero's known bounds for board
  games) or by the min-max of the Q values seen in the tree (``"tree"``). An unvisited child's
  ``Q_hat`` is the node's own scaled value minus ``fpu_reduction`` (first-play urgency). Exact
  ties go to a tiny per-child random jitter drawn from the search's generator.
- **Root noise** (collection): ``(1 - w) P + w Dirichlet(alpha)`` over the root's legal moves.

**Gumbel root** (``gumbel=``: a :class:`lz_tune.mcts.strategies.Gumbel`, read for its hyperparameters;
Danihelka et al. 2022, as mctx's
``gumbel_muzero_policy`` and pgx's AlphaZero use it): no Dirichlet noise; at the root, Gumbel
top-k with sequential halving over the legal moves (``g = gumbel_scale * Gumbel(0, 1)`` drawn
once per search, ``k = min(m, #legal)``; at simulation ``j`` the root takes the
``argmax g + logit + sigma`` among the moves with exactly ``considered_visits(k, n)[j]`` visits);
below the root the deterministic interior rule ``argmax softmax(logit + sigma) - N / (1 + sum N)``.
``sigma = (c_visit + max N) c_scale Q~``, ``Q~`` the completed Q (``v_mix`` for unvisited moves)
min-max rescaled over the node's legal moves (mctx rescales over all A actions, where an illegal
action enters with ``v_mix``: the same whenever ``v_mix`` lies within the visited Q range). The
search then gives the improved policy ``softmax(logit + sigma)`` over the legal moves (the policy
target) and its own action (``argmax g + logit + sigma`` among the most visited moves), as
:mod:`lz_tune.mcts.gumbel` does for the learned-model types.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from lz_tune.mcts.gumbel import FLOAT32_TINY, considered_visits
from lz_tune.mcts.strategies import Gumbel, dirichlet_noise

__all__ = [
    "GameNode",
    "RulesPUCT",
    "RulesSearchOutput",
    "LeafEvaluator",
    "gumbel_scores",
    "search_game_states",
]

LeafEvaluator = Callable[[Sequence[Any]], tuple[np.ndarray, np.ndarray]]
"""``evaluate(states)`` for K non-terminal game states: ``(policy logits [K, A] float32, values
[K] float32)``, each value from the view of the state's player to move."""

_JITTER = 1e-7


class GameNode:
    """One node: a game state and the statistics of its edges (one per legal move).

    Edge lists are aligned with ``actions``; ``w[i] / n[i]`` is ``Q(s, actions[i])`` from the
    view of ``player`` (the player to move here).
    """

    __slots__ = (
        "state",
        "player",
        "terminal",
        "actions",
        "prior",
        "jitter",
        "n",
        "w",
        "children",
        "reward",
        "sign",
        "visits",
        "value_sum",
        "raw_value",
    )

    def __init__(self, state: Any) -> None:
        self.state = state
        self.terminal = bool(state.is_terminal())
        self.player = -1 if self.terminal else int(state.current_player())
        self.actions: list[int] = [] if self.terminal else [int(a) for a in state.legal_actions()]
        k = len(self.actions)
        self.prior: list[float] = []
        self.jitter: list[float] = []
        self.n = [0] * k
        self.w = [0.0] * k
        self.children: list[Optional[GameNode]] = [None] * k
        self.reward = [0.0] * k
        self.sign = [0.0] * k
        self.visits = 0
        self.value_sum = 0.0
        self.raw_value = 0.0

    @property
    def value(self) -> float:
        """V(s): the search value from the view of the player to move (0 when terminal)."""
        return self.value_sum / self.visits if self.visits and not self.terminal else 0.0

    def q(self, i: int) -> float:
        """Q of edge ``i`` (NaN if never visited)."""
        return self.w[i] / self.n[i] if self.n[i] else math.nan

    def expand(self, logits: np.ndarray, value: float, rng: np.random.Generator) -> None:
        """Prior (softmax of ``logits`` [A] over the legal moves), the network's value, one visit."""
        legal = np.asarray(logits, np.float64)[self.actions]
        e = np.exp(legal - legal.max())
        self.prior = (e / e.sum()).tolist()
        self.jitter = (_JITTER * rng.random(len(self.actions))).tolist()
        self.raw_value = float(value)
        self.visits = 1
        self.value_sum = float(value)


@dataclass(frozen=True, kw_only=True)
class RulesPUCT:
    """Hyperparameters of :func:`search_game_states` (see the module docstring)."""

    pb_c_base: float = 19652.0
    pb_c_init: float = 1.25
    root_dirichlet_alpha: float = 0.3
    root_noise_weight: float = 0.0
    """Dirichlet mix at the root (collection); 0: no noise."""
    discount: float = 1.0
    q_normalization: str = "game"
    """``game``: Q scaled by ``utility_range``; ``tree``: by the min-max of the tree's Q values."""
    utility_range: tuple[float, float] = (-1.0, 1.0)
    """The game's (min, max) utility (``game.min_utility()``, ``game.max_utility()``)."""
    fpu_reduction: float = 0.0
    """An unvisited child's scaled Q is the node's scaled value minus this."""

    def __post_init__(self) -> None:
        if self.q_normalization not in ("game", "tree"):
            raise ValueError(f"q_normalization must be 'game' or 'tree', got {self.q_normalization!r}")
        lo, hi = self.utility_range
        if not hi > lo:
            raise ValueError(f"utility_range must be (min, max) with max > min, got {self.utility_range}")


def gumbel_scores(node: "GameNode", gumbel: Gumbel) -> tuple[list[float], list[float]]:
    """``(logits, sigma)`` over ``node``'s legal moves (lists aligned with ``node.actions``):
    ``logit = log P``, ``sigma = (c_visit + max N) c_scale Q~`` with the completed, min-max
    rescaled Q (module docstring; mctx's ``qtransform_completed_by_mix_value``)."""
    n, w, prior = node.n, node.w, node.prior
    logits = [math.log(max(p, 1e-30)) for p in prior]
    sum_n = sum(n)
    v_mix = node.raw_value
    if sum_n > 0:
        sum_p = sum_pq = 0.0
        for ni, wi, p in zip(n, w, prior):
            if ni:
                pf = max(p, FLOAT32_TINY)
                sum_p += pf
                sum_pq += pf * wi / ni
        v_mix = (v_mix + sum_n * sum_pq / sum_p) / (1.0 + sum_n)
    cq = [wi / ni if ni else v_mix for ni, wi in zip(n, w)]
    lo, hi = min(cq), max(cq)
    spread = max(hi - lo, 1e-8)
    scale = (gumbel.c_visit + max(n)) * gumbel.c_scale
    return logits, [scale * (q - lo) / spread for q in cq]


def _gumbel_interior(node: "GameNode", gumbel: Gumbel) -> int:
    """The interior rule: ``argmax softmax(logit + sigma) - N / (1 + sum N)`` (first on ties)."""
    logits, sigma = gumbel_scores(node, gumbel)
    z = [lg + sg for lg, sg in zip(logits, sigma)]
    m = max(z)
    e = [math.exp(x - m) for x in z]
    total, sum_n = sum(e), sum(node.n)
    best, best_i = -math.inf, 0
    for i, (ei, ni) in enumerate(zip(e, node.n)):
        score = ei / total - ni / (1.0 + sum_n)
        if score > best:
            best, best_i = score, i
    return best_i


def _gumbel_root(node: "GameNode", gumbel: Gumbel, g: list[float], considered: int) -> int:
    """The root rule: ``argmax g + logit + sigma`` among the moves with ``considered`` visits (first
    on ties; the first move if none qualifies)."""
    logits, sigma = gumbel_scores(node, gumbel)
    best, best_i = -math.inf, -1
    for i, ni in enumerate(node.n):
        if ni == considered:
            score = g[i] + logits[i] + sigma[i]
            if score > best:
                best, best_i = score, i
    return best_i if best_i >= 0 else 0


@dataclass(frozen=True)
class RulesSearchOutput:
    """Result of :func:`search_game_states` over B roots."""

    visit_counts: np.ndarray
    """[B, A] int32 visits of each root move (0 for illegal ones; sums to num_simulations)."""
    root_value: np.ndarray
    """[B] float32 search value of each root (view of its player to move)."""
    pred_value: np.ndarray
    """[B] float32 the network's value of each root."""
    root_q: np.ndarray
    """[B, A] float32 Q of each root move; NaN where never visited or illegal."""
    roots: tuple[GameNode, ...]
    """The trees, for inspection and tests."""
    improved_policy: Optional[np.ndarray] = None
    """Gumbel root only: [B, A] float32 ``softmax(logit + sigma)`` over the legal moves (the
    policy target); None for pUCT."""
    action: Optional[np.ndarray] = None
    """Gumbel root only: [B] int64 the search's action (``argmax g + logit + sigma`` among the
    most visited moves); None for pUCT (the caller picks from the visit counts)."""

    @property
    def visit_distribution(self) -> np.ndarray:
        """[B, A] float32 normalised root visit counts (pUCT's policy target)."""
        counts = self.visit_counts.astype(np.float32)
        return counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)


class _Scale:
    """Q -> [0, 1]: by the game's utility range, or by the running min-max of one tree."""

    __slots__ = ("lo", "hi", "tree")

    def __init__(self, rule: RulesPUCT) -> None:
        self.tree = rule.q_normalization == "tree"
        self.lo, self.hi = (math.inf, -math.inf) if self.tree else rule.utility_range

    def update(self, q: float) -> None:
        if self.tree:
            if q < self.lo:
                self.lo = q
            if q > self.hi:
                self.hi = q

    def __call__(self, q: float) -> float:
        span = self.hi - self.lo
        if not span > 0.0:
            return q  # "tree" before two distinct values: raw (MuZero's MinMaxStats)
        x = (q - self.lo) / span
        return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def _select(node: GameNode, rule: RulesPUCT, scale: _Scale) -> int:
    """Index of the pUCT choice among ``node``'s legal moves."""
    total = node.visits
    c = (math.log((total + rule.pb_c_base + 1.0) / rule.pb_c_base) + rule.pb_c_init) * math.sqrt(total)
    fpu = scale(node.value_sum / total) - rule.fpu_reduction
    best, best_i = -math.inf, 0
    n, w, prior, jitter = node.n, node.w, node.prior, node.jitter
    for i in range(len(n)):
        ni = n[i]
        q_hat = scale(w[i] / ni) if ni else fpu
        score = q_hat + c * prior[i] / (1 + ni) + jitter[i]
        if score > best:
            best, best_i = score, i
    return best_i


def _backup(path: list[tuple[GameNode, int]], value: float, rule: RulesPUCT, scale: _Scale) -> None:
    """Back ``value`` (the leaf's, view of its player to move; 0 at a terminal leaf) up ``path``."""
    g = value
    for node, i in reversed(path):
        g = node.reward[i] + rule.discount * node.sign[i] * g
        node.n[i] += 1
        node.w[i] += g
        node.visits += 1
        node.value_sum += g
        scale.update(node.w[i] / node.n[i])


def _child(node: GameNode, i: int) -> GameNode:
    """The child of edge ``i`` (the game's rules: a clone of the state with the move applied), its
    edge reward (the mover's) and the backup sign."""
    state = node.state.clone()
    state.apply_action(node.actions[i])
    child = GameNode(state)
    node.reward[i] = float(state.rewards()[node.player])
    node.sign[i] = 1.0 if child.player == node.player else -1.0
    node.children[i] = child
    return child


def search_game_states(
    states: Sequence[Any],
    *,
    evaluate: LeafEvaluator,
    num_actions: int,
    num_simulations: int,
    rule: RulesPUCT,
    rng: np.random.Generator,
    gumbel: Optional[Gumbel] = None,
) -> RulesSearchOutput:
    """``num_simulations`` simulations from each of B non-terminal game ``states`` (not modified:
    the roots hold clones), the network calls batched over the trees (see the module docstring).
    ``gumbel``: Gumbel root selection instead of pUCT + Dirichlet noise at the root (pUCT's
    ``rule`` still gives the discount)."""
    if num_simulations < 1:
        raise ValueError(f"num_simulations must be >= 1, got {num_simulations}")
    roots = [GameNode(s.clone()) for s in states]
    for b, root in enumerate(roots):
        if root.terminal or not root.actions:
            raise ValueError(f"search_game_states: root {b} is a finished game, there is no move to search")
    logits, values = evaluate([r.state for r in roots])
    for b, root in enumerate(roots):
        root.expand(logits[b], float(values[b]), rng)
    root_g: list[list[float]] = []
    schedules: list[list[int]] = []
    if gumbel is not None:
        for root in roots:
            k = len(root.actions)
            root_g.append((gumbel.gumbel_scale * rng.gumbel(size=k)).tolist())
            schedules.append(considered_visits(min(gumbel.max_num_considered_actions, k), num_simulations))
    elif rule.root_noise_weight > 0:
        mask = np.zeros((len(roots), num_actions), bool)
        for b, root in enumerate(roots):
            mask[b, root.actions] = True
        noise = dirichlet_noise(rng, mask, rule.root_dirichlet_alpha)
        w = rule.root_noise_weight
        for b, root in enumerate(roots):
            root.prior = [(1.0 - w) * p + w * float(noise[b, a]) for p, a in zip(root.prior, root.actions)]
    scales = [_Scale(rule) for _ in roots]

    for sim in range(num_simulations):
        pending: list[tuple[int, GameNode, list[tuple[GameNode, int]]]] = []
        for b, root in enumerate(roots):
            node, path, scale = root, [], scales[b]
            while True:
                if gumbel is None:
                    i = _select(node, rule, scale)
                elif node is root:
                    i = _gumbel_root(node, gumbel, root_g[b], schedules[b][sim])
                else:
                    i = _gumbel_interior(node, gumbel)
                path.append((node, i))
                child = node.children[i]
                if child is None:
                    child = _child(node, i)
                    if child.terminal:
                        child.visits = 1
                        _backup(path, 0.0, rule, scale)
                    else:
                        pending.append((b, child, path))
                    break
                if child.terminal:
                    child.visits += 1
                    _backup(path, 0.0, rule, scale)
                    break
                node = child
        if pending:
            logits, values = evaluate([leaf.state for _, leaf, _ in pending])
            for k, (b, leaf, path) in enumerate(pending):
                leaf.expand(logits[k], float(values[k]), rng)
                _backup(path, float(values[k]), rule, scales[b])

    counts = np.zeros((len(roots), num_actions), np.int32)
    q = np.full((len(roots), num_actions), np.nan, np.float32)
    for b, root in enumerate(roots):
        counts[b, root.actions] = root.n
        for i, a in enumerate(root.actions):
            q[b, a] = root.q(i)
    improved = action = None
    if gumbel is not None:
        improved = np.zeros((len(roots), num_actions), np.float32)
        action = np.zeros(len(roots), np.int64)
        for b, root in enumerate(roots):
            root_logits, root_sigma = gumbel_scores(root, gumbel)
            z = np.array(root_logits) + np.array(root_sigma)
            e = np.exp(z - z.max())
            improved[b, root.actions] = e / e.sum()
            action[b] = root.actions[_gumbel_root(root, gumbel, root_g[b], max(root.n))]
    return RulesSearchOutput(
        visit_counts=counts,
        root_value=np.array([r.value for r in roots], np.float32),
        pred_value=np.array([r.raw_value for r in roots], np.float32),
        root_q=q,
        roots=tuple(roots),
        improved_policy=improved,
        action=action,
    )
