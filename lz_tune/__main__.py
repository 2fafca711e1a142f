"""``python -m lz_tune <command>``: see :mod:`lz_tune.cli` (``python -m lz_tune --help``).

python -m lz_tune train zoo/classic_control/cartpole_muzero.py
python -m lz_tune train zoo/atari/pong_muzero.py --async-pipeline
python -m lz_tune tune search_spaces/cartpole_muzero.py --num-samples 8 --scheduler asha --name cp
python -m lz_tune evaluate runs/cartpole_muzero --episodes 5 --video cartpole.gif
python -m lz_tune config zoo/classic_control/cartpole_muzero.py mcts.num_simulations=7
"""

import sys

from lz_tune.cli.signals import SIGNALS

if __name__ == "__main__":  # a signal while torch & co load: one line, no traceback
    SIGNALS.install()
try:
    from lz_tune.cli.main import main, run_as_process
except KeyboardInterrupt:
    print("interrupted before training started; nothing was written", file=sys.stderr)
    sys.exit(SIGNALS.exit_code)

__all__ = ["main"]

if __name__ == "__main__":
    run_as_process()
