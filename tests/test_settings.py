"""`brook serve`'s settings are declared once (brook.settings.ServeSettings): the flags,
BROOK_* variables and brook.toml keys are made from it, and each setting reaches the
part that takes it."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import click
import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from brook import settings
from brook.broker import Broker
from brook.cli import main
from brook.cli.serve import serve
from brook.server.http import HttpLimits
from brook.storage.location import LOCAL_OPTIONS, S3_OPTIONS

BOUNDED = [f for f in settings.FIELDS if f.kind in ("int", "float") and f.low is not None]


def test_every_setting_is_an_option_of_serve_with_its_variable() -> None:
    options = {p.name: p for p in serve.params if isinstance(p, click.Option)}
    assert "--config" in options.pop("config_path").opts, "the file they come from (SPEC §5)"
    assert set(options) == {f.name for f in settings.FIELDS}
    for field in settings.FIELDS:
        option = options[field.name]
        assert field.flag in option.opts and option.envvar == field.envvar
        if field.kind != "bool":
            assert option.default == field.default, field.name
        if isinstance(option.type, click.IntRange | click.FloatRange):
            assert (option.type.min, option.type.max) == (field.low, field.high), field.name


def test_each_setting_reaches_the_part_that_takes_it() -> None:
    """A role names where a setting goes: the broker's keyword arguments, the HTTP
    limits, the storage's options (besides where the data is), or the process."""
    chosen = settings.ServeSettings()
    broker = set(inspect.signature(Broker).parameters)
    assert set(chosen.of_role("broker")) <= broker
    assert set(chosen.of_role("http")) == {f.name for f in dataclasses.fields(HttpLimits)}
    assert set(chosen.of_role("s3")) - {"storage"} <= S3_OPTIONS
    assert set(chosen.of_role("local")) - {"data"} <= LOCAL_OPTIONS
    roles = [chosen.of_role(role) for role in ("broker", "local", "s3", "http", "server")]
    assert sum(map(len, roles)) == len(settings.FIELDS)


@pytest.mark.parametrize("field", BOUNDED, ids=lambda f: f.name)
@given(data=st.data())
def test_a_value_within_its_bounds_is_taken_and_one_outside_refused(
    field: settings.Field, data: st.DataObject
) -> None:
    assert field.low is not None
    high = field.high if field.high is not None else field.low + 10**9
    if field.kind == "int":
        inside: float = data.draw(st.integers(int(field.low), int(high)))
        below: float = field.low - 1
    else:
        inside = data.draw(st.floats(field.low, high, allow_nan=False))
        below = field.low - 0.05
    assert getattr(settings.settings_from({field.name: inside}), field.name) == inside
    with pytest.raises(msgspec.ValidationError, match=field.name):
        settings.settings_from({field.name: below})


def test_a_setting_out_of_bounds_from_the_environment_is_one_line() -> None:
    result = CliRunner().invoke(main, ["serve"], env={"BROOK_LINGER_MS": "5000"})
    assert result.exit_code == 2
    assert "BROOK_LINGER_MS" in result.output and "0<=x<=1000" in result.output


def test_a_list_setting_takes_a_flag_per_item_and_a_variable_split_by_spaces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    given = ["--metrics-endpoints", "acme", "--metrics-endpoints", "billing-*"]
    values = serve.make_context("serve", given).params
    assert settings.settings_from(values).of_role("broker")["metrics_endpoints"] == (
        "acme",
        "billing-*",
    )
    monkeypatch.setenv("BROOK_METRICS_ENDPOINTS", "acme eu-[ab]")
    assert serve.make_context("serve", []).params["metrics_endpoints"] == ("acme", "eu-[ab]")
    with pytest.raises(msgspec.ValidationError, match="metrics_endpoints"):
        settings.settings_from({"metrics_endpoints": ["no/slash"]})


def test_a_list_setting_in_brook_toml_must_be_a_list(tmp_path: Path) -> None:
    config = tmp_path / "brook.toml"
    config.write_text('metrics_endpoints = "acme"\n')
    result = CliRunner().invoke(main, ["--config", str(config), "serve"])
    assert result.exit_code != 0
    assert "metrics_endpoints = 'acme': give a list" in result.output
