"""``python -m lz_tune config ZOO_CONFIG [key=value ...]`` and the zoo list of ``--help``."""

from __future__ import annotations

import os
import re

import pytest

from tests.conftest import CARTPOLE_ZOO, REPO_ROOT, run_cli

KEY_LINE = re.compile(r"^([* ]) (\S+) = (.*?)    \((.*); default (.*)\)$")


def _main(capsys, *args: str, cwd: str = REPO_ROOT) -> tuple[int, str, str]:
    """``python -m lz_tune ARGS`` in this process, run from ``cwd``: (exit code, stdout, stderr)."""
    return run_cli(capsys, *args, cwd=cwd)


def _fields(stdout: str) -> dict[str, dict]:
    """key -> {changed, value, type, default, doc, section} parsed from the output."""
    fields, section, last = {}, None, None
    for line in stdout.splitlines():
        if line.startswith("["):
            section, last = line[1 : line.index("]")], None
        elif m := KEY_LINE.match(line):
            last = m.group(2)
            assert last not in fields, f"{last} printed twice"
            fields[last] = {
                "changed": m.group(1) == "*",
                "value": m.group(3),
                "type": m.group(4),
                "default": m.group(5),
                "doc": "",
                "section": section,
            }
        elif line.startswith("      ") and last is not None:
            fields[last]["doc"] += line.strip() + " "
    return fields


def _leaves(d: dict, prefix: str = "") -> list[str]:
    return [
        k for key, v in d.items() for k in (_leaves(v, f"{prefix}{key}.") if isinstance(v, dict) else [prefix + key])
    ]


def test_config_prints_every_field_with_value_type_default_and_doc(capsys):
    from lz_tune.config_loader import load_config_module

    code, out, err = _main(capsys, "config", CARTPOLE_ZOO, "mcts.num_simulations=7")
    assert code == 0, err
    fields = _fields(out)
    cfg = load_config_module(os.path.join(REPO_ROOT, CARTPOLE_ZOO))
    assert sorted(fields) == sorted(_leaves(cfg.to_dict()))  # every field, each once
    f = fields["mcts.num_simulations"]
    assert f == {
        "changed": True,
        "value": "7",
        "type": "int",
        "default": "50",
        "section": "mcts",
        "doc": "Simulations per search during collection (and reanalyze). ",
    }
    assert fields["mcts.pb_c_init"]["changed"] is False and fields["mcts.pb_c_init"]["value"] == "1.25"
    assert fields["env.max_episode_steps"]["type"] == "int | None"
    assert fields["model.kind"]["type"] == "one of 'auto', 'mlp', 'conv', 'conv_mlp'"
    assert fields["model.hidden_sizes"]["type"] == "tuple[int, ...]"
    assert fields["exp_name"] == {
        "changed": True,
        "value": "'cartpole_muzero'",
        "type": "str",
        "default": "'muzero'",
        "section": "top level",
        "doc": "Experiment name (folder under the experiment root). ",
    }
    undocumented = [k for k, v in fields.items() if v["doc"].strip() in ("", "(no documentation)")]
    assert undocumented == []
    assert "[mcts]  Tree search constants" in out


def test_config_changed_lists_only_the_fields_off_their_defaults(capsys):
    code, out, err = _main(capsys, "config", CARTPOLE_ZOO, "mcts.num_simulations=7", "--changed")
    assert code == 0, err
    fields = _fields(out)
    assert "mcts.num_simulations" in fields and "exp_name" in fields and "mcts.pb_c_init" not in fields
    assert all(f["changed"] for f in fields.values())


@pytest.mark.parametrize(
    "override,named",
    [
        ("mcts.num_simulatons=7", "mcts.num_simulatons: unknown config key"),
        ("mcts.num_simulations=abc", "mcts.num_simulations: expected an integer"),
        ("mcts.num_simulations=-1", "mcts.num_simulations: must be > 0"),
        ("mcts=3", "mcts: is a section"),
    ],
)
def test_config_bad_key_or_value_exits_2_naming_it(capsys, override, named):
    code, out, err = _main(capsys, "config", CARTPOLE_ZOO, override)
    assert code == 2, (code, err)
    assert err.startswith("error: ") and named in err, err
    assert out == ""


def test_config_missing_zoo_file_exits_2(capsys):
    code, out, err = _main(capsys, "config", "zoo/classic_control/no_such_config.py")
    assert code == 2 and "zoo/classic_control/no_such_config.py: config file not found" in err and out == ""


@pytest.mark.parametrize("args", [["--help"], ["config", "--help"], ["train", "--help"]])
def test_help_lists_the_zoo_configs(capsys, tmp_path, args):
    code, out, _ = _main(capsys, *args)
    assert code == 0
    rows = _zoo_rows(out)  # each line: the short name, then the file
    assert all(os.path.basename(path) == f"{name}.py" for name, path in rows)
    listed = [path for _, path in rows]
    assert "zoo/classic_control/cartpole_muzero.py" in listed and "zoo/atari/pong_muzero.py" in listed
    expected = sorted(
        os.path.relpath(os.path.join(d, f), REPO_ROOT)
        for d, _, files in os.walk(os.path.join(REPO_ROOT, "zoo"))
        for f in files
        if f.endswith(".py") and not f.startswith("_") and os.path.dirname(d) == os.path.join(REPO_ROOT, "zoo")
    )
    assert listed == expected
    # from another folder: absolute paths, still usable as CONFIG there
    code, out, _ = _main(capsys, *args, cwd=str(tmp_path))
    listed = [path for _, path in _zoo_rows(out) if path.endswith("cartpole_muzero.py")]
    assert listed == [os.path.join(REPO_ROOT, "zoo", "classic_control", "cartpole_muzero.py")]


def _zoo_rows(help_text: str) -> list[tuple[str, str]]:
    """(short name, file) of each zoo config line of the --help epilog."""
    rows = [line.split() for line in help_text.splitlines() if line.startswith("  ")]
    return [(row[0], row[1]) for row in rows if len(row) == 2 and row[1].endswith(".py")]
