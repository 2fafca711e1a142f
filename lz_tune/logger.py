"""TensorBoard scalars (tensorboardX).

Named ``logger`` rather than ``logging`` so that it never shadows the standard library.
"""

from __future__ import annotations

import os
from typing import Mapping, Optional


class ScalarLogger:
    """Writes scalars to TensorBoard event files (tensorboardX); a no-op when ``log_dir`` is None.

    Two views of the same scalars: ``log_dir`` (``<run>/tb``) against env steps
    (``num_env_steps_sampled_lifetime``, the x-axis RL curves use), and ``train_iter_dir``
    (``<run>/tb_train_iter``, when given) against learner updates. ``tensorboard --logdir RUN/tb``
    shows the first; point it at ``tb_train_iter`` for the second.
    """

    def __init__(self, log_dir: Optional[str], train_iter_dir: Optional[str] = None) -> None:
        self.log_dir = log_dir
        self.train_iter_dir = train_iter_dir if log_dir is not None else None
        self._writers: list = []
        if log_dir is not None:
            from tensorboardX import SummaryWriter

            for folder in (log_dir, self.train_iter_dir):
                if folder is not None:
                    os.makedirs(folder, exist_ok=True)
                    self._writers.append(SummaryWriter(log_dir=folder, flush_secs=10))

    def log(self, scalars: Mapping[str, Optional[float]], *, env_steps: int, train_iter: int) -> None:
        """Each scalar at x = ``env_steps`` (and x = ``train_iter`` in the second view); None skipped."""
        for writer, step in zip(self._writers, (env_steps, train_iter)):
            for key, value in scalars.items():
                if value is not None:
                    writer.add_scalar(key, float(value), global_step=int(step))

    def flush(self) -> None:
        for writer in self._writers:
            writer.flush()

    def close(self) -> None:
        for writer in self._writers:
            writer.close()
        self._writers = []
