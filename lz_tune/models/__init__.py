"""MuZero-family networks and categorical value/reward supports."""

from lz_tune.models.base import (
    InitialOutput,
    MuZeroNetwork,
    RecurrentOutput,
    normalize_latent,
    observation_to_float,
)
from lz_tune.models.conv import MuZeroConvNetwork
from lz_tune.models.mlp import MuZeroMLPNetwork
from lz_tune.models.projection import SimSiamProjector
from lz_tune.models.support import (
    inverse_scalar_transform,
    scalar_to_support,
    scalar_transform,
    support_to_scalar,
    support_to_scalar_np,
    two_hot,
)

__all__ = [
    "InitialOutput",
    "RecurrentOutput",
    "MuZeroNetwork",
    "MuZeroMLPNetwork",
    "MuZeroConvNetwork",
    "SimSiamProjector",
    "normalize_latent",
    "observation_to_float",
    "scalar_transform",
    "inverse_scalar_transform",
    "two_hot",
    "scalar_to_support",
    "support_to_scalar",
    "support_to_scalar_np",
]
