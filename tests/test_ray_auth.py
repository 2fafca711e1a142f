"""Ray's token authentication stays on: the CLI's own Ray refuses a client without the token.

Also the rule for explicit ``--address`` joins (lz_tune.ray_auth.prepare_join), without Ray."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from lz_tune import ray_auth
from tests.conftest import REPO_ROOT
from tests.test_tune import TINY

#: a client that asks the GCS for its nodes (ray.init would retry for ~25 s before giving up)
_CLIENT = """
import sys
from ray._raylet import GcsClient
try:
    print("NODES", len(GcsClient(address=sys.argv[1]).get_all_node_info(timeout=20)))
except Exception as e:
    print("REFUSED", type(e).__name__, e)
"""


def _env_without_ray_auth(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH") and k != "RAY_ADDRESS"}
    env.update(extra)
    return env


def test_cli_tune_keeps_token_authentication_and_refuses_a_client_without_the_token():
    """`python -m lz_tune tune` with no RAY_AUTH_MODE set starts its local Ray with Ray's default
    token authentication (the token written to $HOME/.ray/auth_token); a process on the same
    machine without the token is refused by that cluster, one with it is served."""
    ray = pytest.importorskip("ray")
    tmp = tempfile.mkdtemp(prefix="lzauth", dir="/tmp")  # short: Ray's socket paths must stay < 108 chars
    home, stranger = os.path.join(tmp, "home"), os.path.join(tmp, "stranger")
    os.makedirs(home)
    os.makedirs(stranger)
    fixed = [f"{k}={v!r}" if not isinstance(v, str) else f"{k}={v}" for k, v in TINY.items()] + ["step_seconds=1.0"]
    cmd = [
        sys.executable,
        "-m",
        "lz_tune",
        "tune",
        "search_spaces/cartpole_muzero.py",
        *fixed,
        "--num-samples",
        "1",
        "--stop-iters",
        "1000",
        "--scheduler",
        "fifo",
        "--num-cpus",
        "2",
        "--storage-path",
        os.path.join(tmp, "results"),
        "--name",
        "auth",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=_env_without_ray_auth(HOME=home, RAY_TMPDIR=tmp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline, ports = time.time() + 180, []
        while not ports and time.time() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            ports = glob.glob(os.path.join(tmp, "ray", "session_*", "gcs_server_port_*"))
            time.sleep(0.5)
        assert ports, "the CLI's Ray did not start within 180 s"
        time.sleep(1.0)  # the port file is written as the GCS starts listening
        with open(ports[0]) as f:
            address = f"{ray.util.get_node_ip_address()}:{f.read().strip()}"
        token_file = os.path.join(home, ".ray", "auth_token")
        assert os.path.isfile(token_file), "Ray made no token: authentication is off"

        def client(**env: str) -> str:
            run = subprocess.run(
                [sys.executable, "-c", _CLIENT, address],
                capture_output=True,
                text=True,
                timeout=120,
                env=_env_without_ray_auth(**env),
            )
            return run.stdout

        refused = client(HOME=stranger)
        assert refused.startswith("REFUSED") and "InvalidAuthToken" in refused, refused
        with open(token_file) as f:
            served = client(HOME=stranger, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=f.read().strip())
        assert served.startswith("NODES"), served  # (its node may not have registered yet)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the CLI's own shutdown: trials stopped, Ray shut down
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize(
    "env, address, expected",
    [
        ({}, "10.0.0.1:6379", None),  # no token on this machine: Ray's own default
        ({"RAY_AUTH_TOKEN": "t"}, "10.0.0.1:6379", "token"),  # a token: an explicit address uses it
        ({"RAY_AUTH_TOKEN": "t"}, "auto", None),  # Ray does it itself for auto
        ({"RAY_AUTH_TOKEN": "t", "RAY_AUTH_MODE": "disabled"}, "10.0.0.1:6379", "disabled"),  # the user's choice stays
        ({"home_token": "t"}, "10.0.0.1:6379", "token"),  # ~/.ray/auth_token
    ],
)
def test_explicit_address_joins_use_this_machines_token(monkeypatch, tmp_path, env, address, expected):
    for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    for key, value in env.items():
        if key == "home_token":
            (tmp_path / ".ray").mkdir()
            (tmp_path / ".ray" / "auth_token").write_text(value)
        else:
            monkeypatch.setenv(key, value)
    ray_auth.prepare_join(address)
    assert os.environ.get("RAY_AUTH_MODE") == expected


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_prepare_join_makes_ray_use_token_mode_although_ray_was_imported_first(tmp_path):
    """Ray reads RAY_AUTH_MODE into its process config when it is imported: setting the variable
    afterwards changed nothing for this process's own join (the README's cluster commands were
    refused with InvalidAuthToken). prepare_join re-reads it. In a fresh process (re-reading Ray's
    config here could disturb this process's own Ray); the end-to-end case against a real
    `ray start --head` cluster is the slow test below."""
    pytest.importorskip("ray")
    script = (
        "import ray\n"
        "from ray._raylet import AuthenticationMode, get_authentication_mode\n"
        "from lz_tune import ray_auth\n"
        "before = get_authentication_mode() == AuthenticationMode.TOKEN\n"
        "ray_auth.prepare_join('10.0.0.1:6379')\n"
        "print(before, get_authentication_mode() == AuthenticationMode.TOKEN)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=_env_without_ray_auth(HOME=str(tmp_path), RAY_AUTH_TOKEN="t"),
    )
    assert run.stdout.split() == ["False", "True"], run.stderr[-2000:]


@pytest.mark.slow  # ~40 s each: a real head node, then the CLI in a fresh process
@pytest.mark.parametrize("how", ["explicit", "auto"])
def test_the_cli_joins_a_token_cluster_as_the_readme_starts_it(how):
    """README "Running on a cluster", word for word, in a temporary HOME: ``ray get-auth-token
    --generate``, ``RAY_AUTH_MODE=token ray start --head --port=P``, then the CLI in a fresh process
    with RAY_AUTH_MODE unset joins by explicit address (lz-tune turns token mode on: the machine
    has a token) or by ``auto`` (Ray does), and trains. Ray reads RAY_AUTH_MODE into its config
    when it is imported: setting the variable later without re-reading it was refused with
    InvalidAuthToken."""
    pytest.importorskip("ray")
    tmp = tempfile.mkdtemp(prefix="lzjoin", dir="/tmp")  # short: Ray's socket paths must stay < 108 chars
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    env = _env_without_ray_auth(HOME=home, RAY_TMPDIR=tmp)
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    subprocess.run([ray_cli, "get-auth-token", "--generate"], env=env, check=True, capture_output=True, timeout=120)
    port = _free_port()
    head = subprocess.Popen(
        [ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false", "--block"],
        env={**env, "RAY_AUTH_MODE": "token"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    overrides = [f"{k}={v!r}" if not isinstance(v, str) else f"{k}={v}" for k, v in TINY.items()]
    try:
        for address in [f"127.0.0.1:{port}" if how == "explicit" else "auto"]:
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "lz_tune",
                    "train",
                    "zoo/classic_control/cartpole_muzero.py",
                    "--async-pipeline",
                    "--address",
                    address,
                    *overrides,
                    "max_env_step=160",
                    "async_pipeline.collector_num_cpus=0.5",
                    "async_pipeline.evaluator_num_cpus=0.5",
                    "--exp-dir",
                    os.path.join(tmp, "run_" + address.replace(":", "_").replace(".", "_")),
                ],
                cwd=REPO_ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert head.poll() is None, head.stderr.read().decode()[-2000:]
            assert run.returncode == 0, (address, run.stdout[-1500:], run.stderr[-3000:])
            assert "InvalidAuthToken" not in run.stderr
    finally:
        if head.poll() is None:
            head.send_signal(signal.SIGTERM)  # `ray start --block` stops its cluster on SIGTERM
            try:
                head.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(head.pid, signal.SIGKILL)  # whatever of the head's session is left
        except ProcessLookupError:
            pass
        shutil.rmtree(tmp, ignore_errors=True)
