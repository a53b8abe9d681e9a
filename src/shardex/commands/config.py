"""Settings an operator gives once: environment variables and named profiles in a config file.

An option that has a setting (``Setting``) takes its value, as the AWS command line
does, from the command line, else its environment variable (``SHARDEX_STORE``,
``SHARDEX_INDEX``), else the chosen profile of the config file, else its default.

The config file is TOML, at ``$SHARDEX_CONFIG`` if set, else
``$XDG_CONFIG_HOME/shardex/config.toml`` (``~/.config/shardex/config.toml`` when
``XDG_CONFIG_HOME`` is unset). Each table is a profile; ``[default]`` applies unless
``--config-profile NAME`` (anywhere on the command line) or ``SHARDEX_PROFILE`` names
another. A named profile does not inherit from ``[default]``::

    [default]
    store = "dynamodb://orders-index?region=eu-west-1"
    index = "orders_by_status"

    [prod]
    store = "dynamodb://orders-index"
    index = "orders_by_status"
    region = "eu-west-1"
    aws_profile = "prod"            # --profile: the AWS profile
    output = "json"                 # --output of every command that has one
    tiers = { dedicated = "dynamodb://orders-heavy" }   # --tier dedicated=...

A file that cannot be read or is not TOML, a profile in force with an unknown setting or a
value of the wrong kind, and a profile named that the file does not hold are refused with
InvalidInput naming the file (exit 2); the other profiles are not read.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from shardex.errors import InvalidInput

__all__ = ["PROFILE_OPTION", "SETTINGS", "Setting", "config_path", "profile_option",
           "setting"]

# setting -> what it holds; "tiers" is a table of tier name -> store URI
SETTINGS: dict[str, str] = {
    "store": "the index's store URI (--store)",
    "index": "the index name (--index)",
    "region": "the AWS region (--region)",
    "aws_profile": "the AWS profile (--profile)",
    "endpoint_url": "the store endpoint (--endpoint-url)",
    "output": "json or table (--output)",
    "tiers": "a table of tier name = store URI (--tier)",
}
PROFILE_OPTION = "--config-profile"
_NAME = "shardex.config-profile"
_LOADED = "shardex.config"


def config_path() -> tuple[Path, bool]:
    """The config file's path, and whether ``SHARDEX_CONFIG`` named it (then it must exist)."""
    named = os.environ.get("SHARDEX_CONFIG")
    if named:
        return Path(named), True
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "shardex" / "config.toml", False


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInput(f"config file {path}: {exc}") from None
    except RecursionError:
        raise InvalidInput(f"config file {path}: nested too deeply") from None


def _checked(path: Path, name: str, profile: Any) -> dict[str, Any]:
    """Profile ``name`` of the file, checked: the one in force only (a typo in another
    profile had failed every command, whichever profile it read)."""
    if not isinstance(profile, dict):
        raise InvalidInput(f"config file {path}: {name!r} must be a profile table "
                           f"([{name}]) of settings, got {profile!r}")
    for key, value in profile.items():
        if key not in SETTINGS:
            near = difflib.get_close_matches(key, SETTINGS, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise InvalidInput(f"config file {path}: profile [{name}] has no setting "
                               f"{key!r}{hint}; settings: {', '.join(SETTINGS)}")
        # the values are checked as the options' own values are, when an option reads them
        if not (isinstance(value, dict) and all(isinstance(uri, str)
                                                for uri in value.values())
                if key == "tiers" else isinstance(value, str)):
            raise InvalidInput(f"config file {path}: [{name}] {key} must be "
                               f"{SETTINGS[key]}, got {value!r}")
    return profile


def _profile(ctx: click.Context) -> Mapping[str, Any]:
    """The settings of the profile in force (empty with no config file and no profile named)."""
    root = ctx.find_root()
    if _LOADED not in root.meta:
        named = root.meta.get(_NAME) or os.environ.get("SHARDEX_PROFILE") or None
        path, must = config_path()
        if path.is_dir():
            raise InvalidInput(f"config file {path} is a directory")
        if not path.is_file():
            if must or named:
                raise InvalidInput(f"config file {path} does not exist"
                                   + (f" (profile {named!r} asked for)" if named else "")
                                   + ("" if must else "; SHARDEX_CONFIG names another"))
            root.meta[_LOADED] = {}
            return root.meta[_LOADED]  # type: ignore[no-any-return]
        doc = _read(path)
        if named is not None and named not in doc:
            raise InvalidInput(f"config file {path} has no profile [{named}]; it has: "
                               f"{', '.join(doc) or 'none'}")
        root.meta[_LOADED] = _checked(path, named or "default", doc.get(named or "default", {}))
    return root.meta[_LOADED]  # type: ignore[no-any-return]


def setting(ctx: click.Context, name: str) -> Any:
    """The value of setting ``name`` in the profile in force, or None."""
    return _profile(ctx).get(name)


class Setting(click.Option):
    """An option that falls back on the config profile's ``setting`` when neither the
    command line nor its environment variable gives it."""

    def __init__(self, *args: Any, setting: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setting = setting

    def get_error_hint(self, ctx: click.Context | None) -> str:
        """The option, and where its value came from when not the command line: a bad
        value read from the config file was blamed on the environment variable (which
        click names whenever an option has one), and the file went unnamed."""
        names = " / ".join(f"'{name}'" for name in self.opts)
        source = None if ctx is None or self.name is None \
            else ctx.get_parameter_source(self.name)
        if source is ParameterSource.ENVIRONMENT and isinstance(self.envvar, str):
            return f"{names} (from {self.envvar})"
        if source is ParameterSource.DEFAULT_MAP and ctx is not None:
            named = ctx.find_root().meta.get(_NAME) or os.environ.get("SHARDEX_PROFILE")
            return (f"{names} (from {self.setting} in [{named or 'default'}] of config file "
                    f"{config_path()[0]})")
        return names

    def consume_value(self, ctx: click.Context,
                      opts: Mapping[str, Any]) -> tuple[Any, ParameterSource]:
        value, source = super().consume_value(ctx, opts)
        if source is ParameterSource.DEFAULT and not ctx.resilient_parsing:
            given = setting(ctx, self.setting)
            if given is not None:
                if isinstance(given, dict):  # tiers: as --tier NAME=URI would give them
                    given = [f"{name}={uri}" for name, uri in given.items()]
                elif self.multiple:  # an option given more than once takes the one value
                    given = [given]
                return given, ParameterSource.DEFAULT_MAP
        return value, source


def _choose(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    if not value:
        raise click.BadParameter("a profile name, not an empty one", param_hint=PROFILE_OPTION)
    root = ctx.find_root()
    root.meta[_NAME] = value
    root.meta.pop(_LOADED, None)
    _profile(ctx)  # a profile that is not there is refused now, whatever the command reads


def profile_option() -> click.Option:
    """``--config-profile NAME``: the config profile to read settings from (eager, so the
    settings of the same command see it)."""
    return click.Option([PROFILE_OPTION], metavar="NAME", is_eager=True, expose_value=False,
                        callback=_choose,
                        help="The profile of the config file to take settings from "
                             "(default: SHARDEX_PROFILE, else [default]).")
