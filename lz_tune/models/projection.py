"""SimSiam projector + predictor for EfficientZero's self-supervised consistency loss."""

from __future__ import annotations

import torch
from torch import nn

from lz_tune.models import _validation as check

__all__ = ["SimSiamProjector"]


class SimSiamProjector(nn.Module):
    """EfficientZero projection (3 layers, BatchNorm) and prediction head (2 layers).

    The online branch is ``prediction_head(projection(x))`` (``with_grad=True``); the
    target branch is ``projection(x)`` only (``with_grad=False``), run by the caller
    under ``torch.no_grad()``. BatchNorm1d needs ``B > 1`` in training mode.

    Args:
        input_dim: flattened latent size.
        hidden_dim: projection hidden width.
        projection_dim: ``P``, output width of both branches.
        predictor_hidden_dim: prediction head hidden width.
    """

    def __init__(self, *, input_dim: int, hidden_dim: int, projection_dim: int, predictor_hidden_dim: int) -> None:
        super().__init__()
        input_dim = check.positive_int("input_dim", input_dim)
        hidden_dim = check.positive_int("projection_hidden_dim", hidden_dim)
        projection_dim = check.positive_int("projection_dim", projection_dim)
        predictor_hidden_dim = check.positive_int("predictor_hidden_dim", predictor_hidden_dim)
        self.projection = nn.Sequential(
            nn.Linear(input_dim, hidden_dim),
            nn.BatchNorm1d(hidden_dim),
            nn.ReLU(inplace=True),
            nn.Linear(hidden_dim, hidden_dim),
            nn.BatchNorm1d(hidden_dim),
            nn.ReLU(inplace=True),
            nn.Linear(hidden_dim, projection_dim),
            nn.BatchNorm1d(projection_dim),
        )
        self.prediction_head = nn.Sequential(
            nn.Linear(projection_dim, predictor_hidden_dim),
            nn.BatchNorm1d(predictor_hidden_dim),
            nn.ReLU(inplace=True),
            nn.Linear(predictor_hidden_dim, projection_dim),
        )

    def forward(self, latent: torch.Tensor, *, with_grad: bool) -> torch.Tensor:
        """Project ``latent [B, ...]`` (flattened internally) to ``[B, P]``."""
        projected = self.projection(latent.flatten(1))
        if with_grad:
            return self.prediction_head(projected)
        return projected
