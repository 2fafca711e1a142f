"""Ctrl-C on an async run closes the Ray actors and leaves no Ray process behind (slow: ~30 s)."""

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("ray")


def _ray_processes() -> int:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if line.startswith(("ray::", "/")) and
               ("raylet" in line or "gcs_server" in line or line.startswith("ray::")))


@pytest.mark.slow
def test_ctrl_c_leaves_no_actor_processes(tmp_path):
    assert _ray_processes() == 0, "another Ray cluster is running; this test needs a quiet machine"
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lz_tune", "train", "zoo/classic_control/cartpole_muzero.py", "--async-pipeline",
         "max_env_step=100000000", "--exp-dir", str(tmp_path / "exp")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(20)
    assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 130, out[-2000:]
    assert "interrupted" in out
    time.sleep(3)
    assert _ray_processes() == 0
