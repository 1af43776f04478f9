"""Where the client and the CLI find the API and the key: flag > environment > profile file.

The profile file is TOML, `~/.config/ostinato/config.toml` (or `$XDG_CONFIG_HOME/ostinato/
config.toml`, or the path in `OSTINATO_CONFIG`)::

    default_profile = "local"

    [profiles.local]
    api_url = "http://127.0.0.1:8080"
    api_key = "ost_..."

    [profiles.prod]
    api_url = "https://ostinato.example.com"
    api_key = "ost_..."
    output = "json"          # the CLI's default -o for this profile

    [profiles.platform]
    api_key = "..."          # the admin key
    tenant = "01a2..."       # the tenant it acts for (X-Ostinato-Tenant)

The profile is `--profile`, else `OSTINATO_PROFILE`, else `default_profile`, else `default`;
naming one explicitly that the file lacks is an error, while a missing file or an absent
`default` profile just means none. `OSTINATO_API_URL`, `OSTINATO_API_KEY` and `OSTINATO_TENANT`
override the profile's values, flags override both (Temporal's and kubectl's order). Unknown
keys are refused, so a typo (`api-key`) is not silently ignored.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_API_URL = "http://127.0.0.1:8080"
PROFILE_KEYS = frozenset({"api_url", "api_key", "output", "tenant"})
OUTPUTS = ("table", "json", "jsonl")


class ConfigError(ValueError):
    """The profile file or the chosen profile is unusable; the message says how."""


@dataclass(frozen=True, slots=True)
class Connection:
    api_url: str
    api_key: str | None
    output: str | None = None  # the profile's default output format (CLI only)
    tenant: str | None = None  # the tenant id the admin key acts for (X-Ostinato-Tenant)
    profile: str | None = None  # the profile read, None: none
    sources: Mapping[str, str] = field(default_factory=dict)  # value -> flag|env|profile|default


def config_path(environ: Mapping[str, str] = os.environ) -> Path:
    if explicit := environ.get("OSTINATO_CONFIG"):
        return Path(explicit).expanduser()
    base = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME") or Path.home())
                                                 / ".config")
    return Path(base) / "ostinato" / "config.toml"


def load_file(path: Path) -> dict[str, Any]:
    """The parsed file, {} when it does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc


def _profile(doc: Mapping[str, Any], name: str, explicit: bool, path: Path) -> dict[str, str]:
    profiles = doc.get("profiles", {})
    if not isinstance(profiles, dict):
        raise ConfigError(f"{path}: `profiles` must be a table of [profiles.<name>] tables")
    values = profiles.get(name)
    if values is None:
        if explicit:
            known = ", ".join(sorted(profiles)) or "none"
            raise ConfigError(f"no profile {name!r} in {path} (profiles: {known})")
        return {}
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: [profiles.{name}] must be a table")
    if unknown := sorted(set(values) - PROFILE_KEYS):
        raise ConfigError(f"{path}: [profiles.{name}] has unknown keys {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(PROFILE_KEYS))})")
    for key, value in values.items():
        if not isinstance(value, str):
            raise ConfigError(f"{path}: [profiles.{name}] {key} must be a string")
    if values.get("output") not in (None, *OUTPUTS):
        raise ConfigError(f"{path}: [profiles.{name}] output must be one of {', '.join(OUTPUTS)}")
    return dict(values)


def resolve(*, profile: str | None = None, api_url: str | None = None,
            api_key: str | None = None, tenant: str | None = None,
            environ: Mapping[str, str] = os.environ, path: Path | None = None) -> Connection:
    """The connection for these flags (None: not given), this environment and profile file."""
    path = path or config_path(environ)
    doc = load_file(path)
    default_name = doc.get("default_profile")
    if default_name is not None and not isinstance(default_name, str):
        raise ConfigError(f"{path}: default_profile must be a string")
    name = profile or environ.get("OSTINATO_PROFILE") or default_name or "default"
    explicit = bool(profile or environ.get("OSTINATO_PROFILE") or default_name)
    values = _profile(doc, name, explicit, path)
    env = {"api_url": environ.get("OSTINATO_API_URL") or None,
           "api_key": environ.get("OSTINATO_API_KEY") or None,
           "tenant": environ.get("OSTINATO_TENANT") or None}
    flags = {"api_url": api_url, "api_key": api_key, "tenant": tenant}
    chosen: dict[str, str | None] = {}
    sources: dict[str, str] = {}
    for key in ("api_url", "api_key", "tenant"):
        for source, value in (("flag", flags[key]), ("env", env[key]),
                              ("profile", values.get(key))):
            if value:
                chosen[key], sources[key] = value, source
                break
        else:
            chosen[key], sources[key] = None, "default"
    url = (chosen["api_url"] or DEFAULT_API_URL).rstrip("/")
    return Connection(api_url=url, api_key=chosen["api_key"], output=values.get("output"),
                      tenant=chosen["tenant"], profile=name if values else None,
                      sources=sources)
