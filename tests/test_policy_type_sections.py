"""A policy type owns its config section: the toy type ``toy`` (tests/toy_section_type.py)
registers a section with one key, ``toy.key``, through the public registration API, and its
configs take, check, document, save and reload that key as a shared one, with no edit of
``lz_tune/config.py``. The built-in types' sections live next to their algorithms the same way."""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys
import textwrap

import pytest

import lz_tune.config as config_module
from lz_tune.algos import get_algorithm
from lz_tune.config import Config, ConfigError, Section
from lz_tune.policy_registry import (
    BUILTIN_POLICY_TYPES,
    config_section_classes,
    lookup_policy_type,
    register_policy_type,
    registered_policy_types,
)
from tests import toy_section_type as toy
from tests.conftest import CARTPOLE_ZOO, REPO_ROOT, run_cli
from tests.test_cli_config import _fields


def toy_cfg(*overrides: str) -> Config:
    return Config().with_overrides([f"policy_type={toy.POLICY_TYPE}", *overrides])


def test_the_entry_carries_the_section_and_the_type_resolves():
    entry = lookup_policy_type(toy.POLICY_TYPE)
    assert entry.section_class() is toy.ToyConfig and entry.config_sections == ("toy",)
    assert get_algorithm(toy.POLICY_TYPE) is toy and "toy" in registered_policy_types()
    builtin = config_section_classes("muzero")
    assert config_section_classes("toy") == (*builtin, toy.ToyConfig)  # the built-ins' sections, then its own


def test_overrides_set_the_key_in_any_order():
    cfg = toy_cfg("toy.key=3")
    assert cfg.toy.key == 3 and cfg.section(toy.ToyConfig).key == 3 and isinstance(cfg.toy, toy.ToyConfig)
    # the key before the policy_type that brings its section (as `config ... toy.key=3 --policy-type ...`)
    assert Config().with_overrides(["toy.key=3", f"policy_type={toy.POLICY_TYPE}"]) == cfg
    assert Config().with_updates({"toy": {"key": 3}, "policy_type": toy.POLICY_TYPE}) == cfg
    assert toy_cfg().toy == toy.ToyConfig()  # the default, filled in
    assert Config(policy_type="toy", sections=(toy.ToyConfig(key=3),)).toy.key == 3  # typed construction


def test_a_misspelt_key_names_the_close_one():
    with pytest.raises(ConfigError, match=r"^toy\.kee: unknown config key 'toy\.kee'; did you mean 'toy\.key'\?"):
        toy_cfg("toy.kee=3")
    with pytest.raises(ConfigError, match=r"^toy\.kee: unknown config key; did you mean 'key'\?"):
        Config.from_dict({"policy_type": toy.POLICY_TYPE, "toy": {"kee": 3}})
    with pytest.raises(ConfigError, match=r"^tyo: unknown config key; did you mean 'toy'\?"):
        Config.from_dict({"policy_type": toy.POLICY_TYPE, "tyo": {"key": 3}})


@pytest.mark.parametrize(
    "value, why", [("0", r"must be > 0 \(got 0\)"), ("1.5", "expected an integer"), ("'three'", "expected an integer")]
)
def test_an_invalid_value_names_the_key(value, why):
    with pytest.raises(ConfigError, match=rf"^toy\.key: {why}"):
        toy_cfg(f"toy.key={value}")
    with pytest.raises(ConfigError, match=r"^toy\.key: must be > 0"):
        toy.ToyConfig(key=-1)  # checked at construction, as every section


def test_round_trip_through_dicts_and_json():
    cfg = toy_cfg("toy.key=3", "learner.batch_size=32")
    data = cfg.to_dict()
    assert data["toy"] == {"key": 3} and list(data)[-1] == "toy"  # a top-level section, as the shared ones
    assert cfg.flat_dict()["toy.key"] == 3
    again = Config.from_dict(json.loads(json.dumps(data)))
    assert again == cfg and again.toy.key == 3 and again.to_dict() == data


def test_only_configs_of_types_that_read_it_hold_it():
    """Other processes know a type registered outside lz-tune from ``policy_type`` only: a config
    of another type never carries its section to them."""
    assert "toy" not in Config().to_dict()
    with pytest.raises(ConfigError, match=r"^toy\.key: unknown config key 'toy'"):
        Config().with_overrides(["toy.key=3"])
    with pytest.raises(AttributeError, match="no attribute or config section 'toy'"):
        Config().toy  # noqa: B018
    back = toy_cfg("toy.key=3").with_overrides(["policy_type=muzero"])  # its section dropped with the type
    assert back == Config() and "toy" not in back.to_dict()
    with pytest.raises(ConfigError, match=r"^toy: not a config section of policy_type 'muzero'"):
        Config(sections=(toy.ToyConfig(),))


def test_a_tune_search_space_sets_the_key():
    from lz_tune.tune.tune_config import config_from_tune

    cfg = config_from_tune({"config": CARTPOLE_ZOO, "policy_type": toy.POLICY_TYPE, "toy.key": 4})
    assert cfg.toy.key == 4 and cfg.env.env_id == "CartPole-v1"


def test_the_config_command_lists_the_key_with_its_docstring(capsys):
    code, out, err = run_cli(capsys, "config", CARTPOLE_ZOO, "toy.key=3", "--policy-type", toy.POLICY_TYPE)
    assert code == 0, err
    fields = _fields(out)
    assert fields["toy.key"] == {
        "changed": True,
        "value": "3",
        "type": "int",
        "default": "1",
        "section": "toy",
        "doc": "How many toys the toy type has (>= 1; read by nothing, the section is what is tested). ",
    }
    assert "\n[toy]  The toy type's own keys (``policy_type=toy``).\n" in out
    code, out, err = run_cli(capsys, "config", CARTPOLE_ZOO, "toy.kee=3", "--policy-type", toy.POLICY_TYPE)
    assert code != 0 and "did you mean 'toy.key'" in err


def test_a_fresh_process_resolves_the_section_from_the_config_alone():
    """What a Ray actor or a Tune trial does: it has registered nothing, it gets the config."""
    script = textwrap.dedent(f"""
        from lz_tune.policy_registry import registered_policy_types
        assert "toy" not in registered_policy_types()
        from lz_tune.config import Config
        cfg = Config.from_dict({{"policy_type": {toy.POLICY_TYPE!r}, "toy": {{"key": 3}}}})
        assert cfg.toy.key == 3 and type(cfg.toy).__module__ == "tests.toy_section_type"
        print("resolved")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "resolved" in done.stdout, done.stderr[-3000:]


def test_config_py_holds_only_the_shared_sections():
    """Each built-in type's section is a class next to its algorithm (``lz_tune/algos/<type>_config.py``)
    named by its registry entry; lz_tune.config defines the sections every type reads."""
    shared = {
        f.type if isinstance(f.type, type) else getattr(config_module, f.type)
        for f in dataclasses.fields(Config)
        if f.name != "sections" and f.name[0] != "_" and isinstance(getattr(Config(), f.name), Section)
    }
    defined = {
        cls
        for cls in vars(config_module).values()
        if inspect.isclass(cls) and issubclass(cls, Section) and cls.__module__ == config_module.__name__
    }
    assert defined == shared | {Section, Config}
    owned = {entry.name: entry.section_class() for entry in BUILTIN_POLICY_TYPES if entry.config_section}
    assert {cls.section_name for cls in owned.values()} == {
        "efficientzero",
        "sampled",
        "gumbel",
        "stochastic",
        "context",
        "unizero",
        "alphazero",
    }
    for name, cls in owned.items():
        assert cls.__module__ == f"lz_tune.algos.{name}_config", (name, cls)
    cfg = Config()
    assert cfg.unizero is cfg.section(owned["unizero"]) and cfg.unizero.num_layers == 2  # cfg.unizero as before


def test_registration_refuses_a_taken_or_unusable_section():
    @dataclass_frozen
    class Unizero(Section):
        """Another class under a built-in section's name."""

        section_name = "unizero"
        key: int = 1

    with pytest.raises(ValueError, match="config section 'unizero' is already owned by policy type 'unizero'"):
        register_policy_type("toy_clash", module=toy.__name__, config_section=Unizero)
    assert "toy_clash" not in registered_policy_types()

    @dataclass_frozen
    class Learner(Section):
        """A section named like a shared one."""

        section_name = "learner"
        key: int = 1

    register_policy_type("toy_shared_name", module=toy.__name__, config_section=Learner)
    with pytest.raises(
        ConfigError,
        match="policy_type: 'toy_shared_name' has a config section named 'learner', the name of a shared key",
    ):
        Config(policy_type="toy_shared_name")
    with pytest.raises(ValueError, match="must be a Section class with a section_name"):
        register_policy_type("toy_nameless", module=toy.__name__, config_section=int)


def dataclass_frozen(cls):
    return dataclasses.dataclass(frozen=True)(cls)
