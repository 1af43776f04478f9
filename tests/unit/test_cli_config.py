"""Where the CLI and `Client.from_profile` find the API: flag > environment > profile file
(`ostinato.client.config`), which file is read, what is refused; and the CLI's exit code 2 for
bad usage and bad configuration, checked without any server."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ostinato.cli import app
from ostinato.cli.context import Globals, Output
from ostinato.client.config import DEFAULT_API_URL, ConfigError, config_path, resolve

FILE = """
default_profile = "staging"

[profiles.default]
api_url = "http://default.example:8080"
api_key = "ost_default"

[profiles.staging]
api_url = "https://staging.example/"
api_key = "ost_staging"
output = "json"

[profiles.prod]
api_url = "https://prod.example"
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(FILE)
    return path


def test_without_a_file_or_environment_the_local_api_and_no_key(tmp_path: Path) -> None:
    conn = resolve(environ={}, path=tmp_path / "missing.toml")
    assert (conn.api_url, conn.api_key, conn.profile, conn.output) == (
        DEFAULT_API_URL, None, None, None)
    assert conn.sources == {"api_url": "default", "api_key": "default", "tenant": "default"}
    assert conn.tenant is None


def test_the_default_profile_named_in_the_file_is_used(config: Path) -> None:
    conn = resolve(environ={}, path=config)
    assert (conn.profile, conn.api_url, conn.api_key, conn.output) == (
        "staging", "https://staging.example", "ost_staging", "json")


def test_the_profile_is_the_flag_else_the_environment(config: Path) -> None:
    assert resolve(profile="prod", environ={"OSTINATO_PROFILE": "default"},
                   path=config).api_url == "https://prod.example"
    assert resolve(environ={"OSTINATO_PROFILE": "default"}, path=config).api_key == "ost_default"


def test_flags_override_the_environment_which_overrides_the_profile(config: Path) -> None:
    env = {"OSTINATO_API_URL": "http://env.example", "OSTINATO_API_KEY": "ost_env"}
    conn = resolve(profile="staging", environ=env, path=config)
    assert (conn.api_url, conn.api_key) == ("http://env.example", "ost_env")
    assert conn.sources == {"api_url": "env", "api_key": "env", "tenant": "default"}
    conn = resolve(profile="staging", api_key="ost_flag", environ=env, path=config)
    assert (conn.api_url, conn.api_key) == ("http://env.example", "ost_flag")
    assert conn.sources == {"api_url": "env", "api_key": "flag", "tenant": "default"}
    # a profile without a key: the environment's fills it in, the profile's URL stays
    conn = resolve(profile="prod", environ={"OSTINATO_API_KEY": "ost_env"}, path=config)
    assert (conn.api_url, conn.api_key) == ("https://prod.example", "ost_env")
    assert conn.sources == {"api_url": "profile", "api_key": "env", "tenant": "default"}


def test_the_tenant_the_admin_key_acts_for_is_the_flag_else_the_environment_else_the_profile(
        tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[profiles.platform]\napi_key = "admin"\ntenant = "t-profile"\n')
    assert resolve(profile="platform", environ={}, path=path).tenant == "t-profile"
    env = {"OSTINATO_TENANT": "t-env"}
    assert resolve(profile="platform", environ=env, path=path).tenant == "t-env"
    conn = resolve(profile="platform", tenant="t-flag", environ=env, path=path)
    assert (conn.tenant, conn.sources["tenant"]) == ("t-flag", "flag")


def test_a_profile_named_explicitly_must_exist(config: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no profile 'qa' .*\(profiles: default, prod, "
                                          r"staging\)"):
        resolve(profile="qa", environ={}, path=config)
    with pytest.raises(ConfigError, match="no profile 'qa'"):
        resolve(environ={"OSTINATO_PROFILE": "qa"}, path=tmp_path / "missing.toml")


@pytest.mark.parametrize(("text", "message"), [
    ("[profiles.default]\napi-key = 'x'\n", "unknown keys api-key"),
    ("[profiles.default]\napi_url = 8080\n", "api_url must be a string"),
    ("[profiles.default]\noutput = 'yaml'\n", "output must be one of table, json, jsonl"),
    ("profiles = 3\n", "must be a table"),
    ("default_profile = ['a']\n", "default_profile must be a string"),
    ("[profiles.default\n", "not valid TOML"),
])
def test_a_bad_file_is_refused_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        resolve(environ={}, path=path)


def test_which_file_is_read(tmp_path: Path) -> None:
    assert config_path({"HOME": str(tmp_path)}) == tmp_path / ".config/ostinato/config.toml"
    assert config_path({"HOME": "/h", "XDG_CONFIG_HOME": str(tmp_path)}) == (
        tmp_path / "ostinato/config.toml")
    assert config_path({"HOME": "/h", "OSTINATO_CONFIG": str(tmp_path / "o.toml")}) == (
        tmp_path / "o.toml")


def test_the_output_format_is_the_command_s_else_the_global_else_the_profile_s(
        config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSTINATO_CONFIG", str(config))
    monkeypatch.delenv("OSTINATO_PROFILE", raising=False)
    assert Globals().output_for(None) is Output.json  # staging's
    assert Globals(profile="prod").output_for(None) is Output.table
    assert Globals(output=Output.jsonl).output_for(None) is Output.jsonl
    assert Globals(output=Output.jsonl).output_for(Output.table) is Output.table


def run(tmp_path: Path, *args: str, config: str | None = None) -> tuple[int, str]:
    env = {"HOME": str(tmp_path), "OSTINATO_API_URL": "http://127.0.0.1:9",
           "OSTINATO_API_KEY": "ost_x", "OSTINATO_PROFILE": None, "OSTINATO_CONFIG": None,
           "XDG_CONFIG_HOME": None, "NO_COLOR": "1"}
    if config is not None:
        path = tmp_path / "config.toml"
        path.write_text(config)
        env["OSTINATO_CONFIG"] = str(path)
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.output + (result.stderr or "")


@pytest.mark.parametrize(("args", "says"), [
    (["runs", "cancel"], "name one or more ids, or select with --state, --job or --task"),
    (["runs", "cancel", "abc", "--state", "queued"], "not both"),
    (["runs", "list", "--state", "sleeping"], "unknown state 'sleeping'"),
    (["jobs", "create", "--cron", "* * * * *"], "a job needs a name"),
    (["jobs", "create", "--name", "x", "--payload", "{nope"], "not JSON"),
    (["jobs", "backfill", "j", "--start", "2026-01-01T00:00", "--end", "2026-01-02T00:00Z"],
     "has no UTC offset"),
    (["schedules", "preview"], "give a schedule"),
    (["runs", "list", "-o", "yaml"], "yaml"),
    (["nope"], "No such command"),
])
def test_bad_usage_exits_2_before_any_request(tmp_path: Path, args: list[str],
                                              says: str) -> None:
    code, output = run(tmp_path, *args)
    assert code == 2, output
    assert says in output


def test_a_bad_profile_file_exits_2_naming_the_problem(tmp_path: Path) -> None:
    code, output = run(tmp_path, "--profile", "ci", "jobs", "list",
                       config="[profiles.ci]\napi-url = 'x'\n")
    assert code == 2
    assert "unknown keys api-url" in output


def test_an_unreachable_api_exits_1(tmp_path: Path) -> None:
    code, output = run(tmp_path, "jobs", "list")
    assert code == 1
    assert "API unreachable" in output
