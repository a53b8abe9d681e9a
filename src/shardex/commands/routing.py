"""``shardex routing``: show or change the routing record of an index in its store."""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path
from typing import Any

import click

from shardex.commands.connection import Connection, connection_options, open_with
from shardex.commands.params import POLICY, ValuePair
from shardex.documents import ROUTING_RECORD_SCHEMA
from shardex.errors import InvalidInput, InvalidRouting, ReshardRefused
from shardex.keys import validate_value
from shardex.routing import Routing, ShardPolicy

__all__ = ["read_json_file", "routing"]

_SHOWN_KEYS = 6


def _store_options(command: Any) -> Any:
    command = click.option("--index", "name", required=True, help="Index name.")(command)
    command = connection_options(command)
    return click.option("--store", "uri", required=True,
                        help="Store URI, e.g. dynamodb://TABLE?region=eu-west-1.")(command)


def _keys_text(keys: list[str]) -> str:
    if len(keys) <= _SHOWN_KEYS:
        return ", ".join(keys)
    return f"{', '.join(keys[:3])}, ..., {keys[-1]} ({len(keys)} keys)"


def _layout(routing: Routing) -> dict[str, Any]:
    return {"default": routing.default.to_dict(),
            "overrides": {value: {**policy.to_dict(), "shard_keys": policy.shard_keys(value)}
                          for value, policy in routing.overrides.items()}}


@click.group()
def routing() -> None:
    """Show or change the routing record (shard counts per value) of an index."""


@routing.command()
@_store_options
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
def show(uri: str, name: str, as_json: bool, connection: Connection) -> None:
    """Print the routing of index NAME: version, default, and the shard keys per value."""
    from shardex.routing_record import RoutingRecord

    async def read() -> tuple[Routing | None, int | None, float, str]:
        store = open_with(uri, connection)
        async with store:
            stored, revision, lease = await RoutingRecord(store, name).read()
        return stored, revision, lease, store.uri

    try:
        validate_value(name)
    except InvalidInput as exc:
        raise InvalidInput(f"index name: {exc}") from None
    stored, revision, lease, where = asyncio.run(read())
    current = stored or Routing()
    if as_json:
        click.echo(json.dumps({
            "schema": ROUTING_RECORD_SCHEMA, "index": name, "store": where,
            "stored": stored is not None, "revision": revision,
            "lease": lease, "routing": current.to_dict(), "layout": _layout(current),
            "previous": None if current.previous is None else _layout(current.previous),
        }, indent=2))
        return
    if stored is None:
        click.echo(f"index {name!r} in {where} has no routing record: every value has one "
                   "shard (the default), until an index stores its routing")
        return
    click.echo(f"index {name!r} in {where}: routing version {current.version} "
               f"(record revision {revision}, lease {lease:g} s)")
    policy = current.default
    click.echo(f"  default: {policy.shards} shard(s), {policy.strategy}")
    for value, policy in current.overrides.items():
        click.echo(f"  {value}: {policy.shards} shard(s), {policy.strategy}: "
                   f"{_keys_text(policy.shard_keys(value))}")
    if current.previous is not None:
        meta = current.reshard
        click.echo(f"  in transition from version {current.previous.version}, state "
                   f"{current.state}" + ("" if meta is None else f" (reshard {meta.id}, "
                                         f"{meta.direction})")
                   + ": 'shardex reshard status' shows it")


def read_json_file(path: Path) -> Any:
    """The JSON document in ``path`` (a ``--file``); a usage error naming it if it is not one."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--file") from exc
    except RecursionError:
        raise click.BadParameter(f"{path}: nested too deeply to be a routing document",
                                 param_hint="--file") from None


def _from_file(path: Path, current: Routing) -> tuple[ShardPolicy, dict[str, ShardPolicy]]:
    doc = read_json_file(path)
    if not isinstance(doc, dict):
        raise InvalidRouting(f"{path}: expected a JSON object with default and overrides")
    version = doc.get("version", current.version + 1)
    if version not in (current.version, current.version + 1) or isinstance(version, bool):
        raise InvalidRouting(
            f"{path}: version is {version!r}, but the stored routing is version "
            f"{current.version}: a file from 'routing show --json' (version "
            f"{current.version}) or for the next version ({current.version + 1}) is "
            "accepted; read the routing again and edit that")
    # a whole routing document, or just its layout
    layout = {**doc, "format": doc.get("format", current.to_dict()["format"]),
              "version": current.version + 1}
    layout.pop("previous", None)
    layout.pop("lease", None)
    layout.pop("token", None)
    parsed = Routing.from_dict(layout)
    return parsed.default, dict(parsed.overrides)


@routing.command("set")
@_store_options
@click.option("--override", "overrides", multiple=True, metavar="VALUE=N[:strategy][@tier]",
              type=ValuePair(POLICY, "VALUE=N[:strategy][@tier]", "PENDING=8:hash"),
              help="Shard VALUE over N shard keys (strategy hash, random or round_robin).")
@click.option("--remove", "removals", multiple=True, metavar="VALUE",
              help="Drop VALUE's override: it follows the default again.")
@click.option("--default", "default", metavar="N[:strategy]", type=POLICY,
              help="The default policy.")
@click.option("--file", "path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A JSON file with default and overrides: the whole new layout.")
def set_routing(uri: str, name: str, overrides: tuple[tuple[str, ShardPolicy], ...],
                removals: tuple[str, ...], default: ShardPolicy | None, path: Path | None,
                connection: Connection) -> None:
    """Create the routing record of index NAME (a compare-and-set write).

    Only an index without a routing record gets one this way, and only for values that
    hold no entries yet. Once a record exists, clients cache it, and a layout changed
    under them would hide the entries they keep writing: 'shardex reshard start' changes
    a stored layout through states that keep every entry readable.
    """
    from shardex.index import ShardedIndex, store_routing
    from shardex.routing_record import RoutingRecord

    if not (overrides or removals or default or path):
        raise click.UsageError("nothing to change: give --override, --remove, --default "
                               "or --file")
    try:
        validate_value(name)
    except InvalidInput as exc:
        raise InvalidInput(f"index name: {exc}") from None

    async def change() -> tuple[Routing, Routing, str]:
        store = open_with(uri, connection)
        async with store:
            stored, _, _ = await RoutingRecord(store, name).read()
            current = stored or Routing()
            base_default, base_overrides = (_from_file(path, current) if path is not None
                                            else (current.default, dict(current.overrides)))
            for value in removals:
                base_overrides.pop(value, None)
            base_overrides.update(overrides)
            new = Routing(default=default or base_default, overrides=base_overrides,
                          version=current.version + 1)
            if stored is not None:
                _refuse_stored(uri, name, current, new, path)
            async with ShardedIndex(store, name) as index:
                await _refuse_hidden_entries(index, current, new)
                await store_routing(index, new)
            return current, new, store.uri

    before, after, where = asyncio.run(change())
    click.echo(f"index {name!r} in {where}: routing version {before.version} -> {after.version}")
    for value in sorted(set(before.overrides) | set(after.overrides)):
        old, new = before.policy(value), after.policy(value)
        if old != new:
            click.echo(f"  {value}: {old.shards} -> {new.shards} shard(s), {new.strategy}")
    if before.default != after.default:
        click.echo(f"  default: {before.default.shards} -> {after.default.shards} shard(s), "
                   f"{after.default.strategy}")


def _refuse_stored(uri: str, name: str, current: Routing, new: Routing,
                   path: Path | None) -> None:
    """Refuse any change of a stored layout, naming the reshard that makes it safely."""
    if current.in_transition:
        raise ReshardRefused(
            f"index {name!r} is in a reshard (routing version {current.version}); "
            "'shardex reshard status' shows it")
    changed = sorted(v for v in set(current.overrides) | set(new.overrides)
                     if current.policy(v) != new.policy(v))
    if not changed and new.default == current.default:
        raise InvalidRouting(f"index {name!r}: the layout asked for is the one stored "
                             f"(routing version {current.version}): nothing to change")
    if path is not None:
        args = f" --file {shlex.quote(str(path))}"
    else:
        args = "".join(f" --set {v}={new.policy(v).shards}:{new.policy(v).strategy}"
                       for v in changed)
        if new.default != current.default:
            args += f" --default {new.default.shards}:{new.default.strategy} --value VALUE..."
    raise ReshardRefused(
        f"index {name!r} already has a routing record, which clients cache: changing its "
        "layout here would hide the entries they keep writing to the old one. Change it "
        "through the reshard states: shardex reshard start --store "
        f"{shlex.quote(uri)} --index {shlex.quote(name)}{args}")


async def _refuse_hidden_entries(index: Any, current: Routing, new: Routing) -> None:
    if new.default != current.default:
        raise click.ClickException(
            "changing the default policy re-routes every value without an override, and "
            "their entries already written would be hidden from reads; use 'shardex reshard "
            "start' to change a live layout")
    changed = sorted(v for v in set(current.overrides) | set(new.overrides)
                     if current.policy(v) != new.policy(v))
    counts = {value: await index.count(value) for value in changed}
    busy = {value: n for value, n in counts.items() if n}
    if busy:
        listed = ", ".join(f"{value} ({n} entries)" for value, n in busy.items())
        raise click.ClickException(
            f"refusing to re-route values that have entries: {listed}; their entries would "
            "stay on the old shard keys, hidden from reads: 'shardex reshard start' changes "
            "a live layout")
