import pytest
import yaml

from agent.config import DEFAULT_CONFIG, Config, ConfigError, load_config, parse_set


def test_default_yaml_documents_exactly_the_model_defaults():
    # Every knob is in configs/default.yaml with the value the code uses when it is absent.
    assert Config.model_validate(yaml.safe_load(DEFAULT_CONFIG.read_text())) == Config()


def test_set_overrides_are_typed_and_dotted():
    cfg = load_config(sets=["evaluator.grader=hidden", "evaluator.timeout_sec=12.5", "evaluator.local.install_steps=skip"])
    assert cfg.evaluator.grader == "hidden" and cfg.evaluator.timeout_sec == 12.5
    assert cfg.evaluator.local.install_steps == "skip"
    assert parse_set("a.b=[1, 2]") == {"a": {"b": [1, 2]}}


def test_unknown_and_ill_typed_keys_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"evaluator\.gradr.*spelling"):
        load_config(sets=["evaluator.gradr=hidden"])
    with pytest.raises(ConfigError, match=r"evaluator\.timeout_sec"):
        load_config(sets=["evaluator.timeout_sec=soon"])
    bad = tmp_path / "c.yaml"
    bad.write_text("evaluator: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML") as e:
        load_config(bad)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="key=value"):
        parse_set("novalue")
