"""``shardex routing``: show or change the routing record of an index in its store."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from shardex.commands.connection import (
    Connection,
    given_tiers,
    index_options,
    lasting,
    named_tiers,
    open_with,
    run_noting,
)
from shardex.commands.params import LOGICAL_KEY, POLICY, ValuePair, distinct
from shardex.documents import DIAGNOSE_SCHEMA, PLAN_SCHEMA, ROUTING_RECORD_SCHEMA
from shardex.errors import InvalidRouting, ReshardRefused
from shardex.routing import ROUTING_FORMAT, Routing, ShardPolicy

__all__ = ["LayoutFile", "layout_file", "read_json_file", "routing"]

_SHOWN_KEYS = 6


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
@index_options()
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
def show(uri: str, name: str, as_json: bool, connection: Connection) -> None:
    """Print the routing of index NAME: version, default, and the shard keys per value."""
    from shardex.routing_record import RoutingRecord

    async def read() -> tuple[Routing | None, int | None, float]:
        store = open_with(uri, connection)
        async with store:
            return await RoutingRecord(store, name).read()

    stored, revision, lease = run_noting(read)
    where = uri  # as given, as every command names it
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
    click.echo(f"  default: {policy.shards} shard(s), {policy.strategy}{_on_tier(policy)}")
    for value, policy in current.overrides.items():
        # the tier says which store holds the value's entries (it went unsaid here)
        click.echo(f"  {value}: {policy.shards} shard(s), {policy.strategy}"
                   f"{_on_tier(policy)}: {_keys_text(policy.shard_keys(value))}")
    if current.previous is not None:
        meta = current.reshard
        click.echo(f"  in transition from version {current.previous.version}, state "
                   f"{current.state}" + ("" if meta is None else f" (reshard {meta.id}, "
                                         f"{meta.direction})")
                   + ": 'shardex reshard status' shows it")


def _on_tier(policy: ShardPolicy) -> str:
    return "" if policy.tier is None else f", on tier {policy.tier!r}"


def read_json_file(path: Path, option: str = "--file") -> Any:
    """The JSON document in ``path`` (``-``: standard input, as ``plan --from -`` reads);
    a usage error naming ``option`` if it is not one."""
    hint = f"'{option}'"
    try:
        raw = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
        return json.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise click.BadParameter(f"{path}: {exc.strerror or exc}", param_hint=hint) from None
    except ValueError as exc:  # not UTF-8, or not JSON
        raise click.BadParameter(f"{path} is not valid JSON: {exc}", param_hint=hint) from None
    except RecursionError:
        raise click.BadParameter(f"{path}: nested too deeply to be a routing document",
                                 param_hint=hint) from None


# documents that carry a routing: its layout is taken as it is
_CARRIERS = (PLAN_SCHEMA, DIAGNOSE_SCHEMA, ROUTING_RECORD_SCHEMA)
_ROUTING_FIELDS = {"format", "version", "default", "overrides", "previous", "state", "reshard",
                   "adoption"}


@dataclass(frozen=True, slots=True)
class LayoutFile:
    """The layout a file gives: ``routing`` (its default is one shard, hash, unless
    ``has_default``), and the routing version it was read at (None for a plan or a
    diagnosis, which know no stored version)."""

    routing: Routing
    has_default: bool
    version: int | None
    # a routing document, record or plan is the whole layout; a diagnosis's routing names
    # the keys it recommends for, and leaves those it saw (sharded or not) as they are
    whole: bool = True


def layout_file(path: Path, option: str = "--file") -> LayoutFile:
    """The layout in ``path``: a routing document, or the ``routing`` of a plan, a
    diagnosis or a routing record (``plan``, ``diagnose`` and ``routing show --json``),
    taken as it is. A file that is none of them is refused (InvalidRouting) naming it."""
    doc = read_json_file(path, option)
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if isinstance(doc, dict) and (schema in _CARRIERS or ("routing" in doc
                                                           and "default" not in doc)):
        doc = doc.get("routing")
    if not isinstance(doc, dict):
        raise InvalidRouting(f"{path}: expected a routing document (an object with default "
                             "and overrides), or a plan, diagnosis or routing record with one")
    unknown = sorted(set(doc) - _ROUTING_FIELDS)
    if unknown:
        raise InvalidRouting(f"{path}: unknown field(s) {', '.join(map(repr, unknown))} in "
                             "a routing document")
    if "default" not in doc and "overrides" not in doc:
        # taken as the whole layout, {} would send every value back to one shard key
        raise InvalidRouting(f"{path}: the routing document names no layout (neither default "
                             "nor overrides); write \"overrides\": {} to mean every value on "
                             "the default")
    version = doc.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                or version < 1):
        raise InvalidRouting(f"{path}: version is {version!r}; a routing version is an "
                             "integer >= 1")
    layout = {"format": doc.get("format", ROUTING_FORMAT), "version": 1,
              "default": doc.get("default", {"shards": 1}), "overrides": doc.get("overrides", {})}
    try:
        routing = Routing.from_dict(layout)
    except InvalidRouting as exc:
        raise InvalidRouting(f"{path}: {exc}") from None
    return LayoutFile(routing, "default" in doc,
                      None if schema in (PLAN_SCHEMA, DIAGNOSE_SCHEMA) else version,
                      whole=schema != DIAGNOSE_SCHEMA)


def _from_file(given: LayoutFile, path: Path, current: Routing
               ) -> tuple[ShardPolicy, dict[str, ShardPolicy]]:
    """The default and overrides a ``--file`` sets over ``current`` (the stored routing)."""
    if given.version is not None and given.version not in (current.version,
                                                           current.version + 1):
        raise click.ClickException(
            f"{path}: version is {given.version!r}, but the stored routing is version "
            f"{current.version}: a file from 'routing show --json' (version "
            f"{current.version}) or for the next version ({current.version + 1}) is "
            "accepted; read the routing again and edit that")
    default = given.routing.default if given.has_default else current.default
    return default, dict(given.routing.overrides)


@routing.command("set")
@index_options(tiers=True)
@click.option("--override", "overrides", multiple=True, metavar="VALUE=N[:strategy][@tier]",
              type=ValuePair(POLICY, "VALUE=N[:strategy][@tier]", "PENDING=8:hash"),
              help="Shard VALUE over N shard keys (strategy hash, random or round_robin), in "
                   "the store of tier 'tier' (--tier) if given.")
@click.option("--remove", "removals", multiple=True, metavar="VALUE", type=LOGICAL_KEY,
              help="Drop VALUE's override: it follows the default again.")
@click.option("--default", "default", metavar="N[:strategy]", type=POLICY,
              help="The default policy.")
@click.option("--file", "path", type=click.Path(exists=True, dir_okay=False, allow_dash=True,
              path_type=Path),
              help="The whole new layout: a routing document, or a plan, diagnosis or "
                   "routing record (--json) with one, as it is.")
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
    given = layout_file(path) if path is not None else None
    chosen = distinct(overrides, "--override")
    both = sorted(set(chosen) & set(distinct([(v, v) for v in removals], "--remove")))
    if both:
        raise click.UsageError(f"{both[0]!r} is given to --override and to --remove: "
                               "give one")
    named_tiers([p.tier for p in chosen.values()], "--override")
    if default is not None:
        named_tiers([default.tier], "--default")
    if given is not None:
        named_tiers([p.tier for p in given.routing.overrides.values()], "--file")
    lasting(uri, "routing set")
    tiers = given_tiers()

    async def change() -> tuple[Routing, Routing]:
        store = open_with(uri, connection)
        async with store:
            stored, _, _ = await RoutingRecord(store, name).read()
            current = stored or Routing()
            base_default, base_overrides = (_from_file(given, path, current) if given
                                            and path else (current.default,
                                                           dict(current.overrides)))
            for value in removals:
                if base_overrides.pop(value, None) is None:
                    # it created the record anyway (the one routing set there is), or
                    # left a mistyped value as it was, unsaid
                    raise click.BadParameter(
                        f"{value!r} has no override to remove (index {name!r}"
                        f"{'' if given is None else ' with --file'} shards it by the "
                        "default); nothing was written", param_hint="'--remove'")
            base_overrides.update(chosen)
            new = Routing(default=default or base_default, overrides=base_overrides,
                          version=current.version + 1)
            _refuse_default(uri, name, current, new)
            if stored is not None:
                _refuse_stored(uri, name, current, new, path)
            # the record this command creates is the one asked for, not Routing() first
            async with ShardedIndex(store, name, tiers=tiers or None,
                                    create_record=False) as index:
                await _refuse_hidden_entries(index, current, new)
                await store_routing(index, new)
            return current, new

    before, after = run_noting(change)
    click.echo(f"index {name!r} in {uri}: routing version {before.version} -> {after.version}")
    for value in sorted(set(before.overrides) | set(after.overrides)):
        old, new = before.policy(value), after.policy(value)
        if old != new:
            click.echo(f"  {value}: {old.shards} -> {new.shards} shard(s), {new.strategy}"
                       + _on_tier(new))
    if before.default != after.default:
        click.echo(f"  default: {before.default.shards} -> {after.default.shards} shard(s), "
                   f"{after.default.strategy}")


def _refuse_default(uri: str, name: str, current: Routing, new: Routing) -> None:
    """Refuse a change of the default policy (usage): whatever the store holds, it would
    re-route every value without an override and hide the entries already written."""
    if new.default != current.default:
        raise click.BadParameter(
            f"routing set keeps the default policy ({current.default.shards} shard(s), "
            f"{current.default.strategy}): changing it re-routes every value without an "
            "override, and their entries already written would be hidden from reads; change "
            f"it through the reshard states: shardex reshard start --store {shlex.quote(uri)} "
            f"--index {shlex.quote(name)} --default {_policy_arg(new.default)} --value VALUE...",
            param_hint="'--default'")


def _refuse_stored(uri: str, name: str, current: Routing, new: Routing,
                   path: Path | None) -> None:
    """Refuse any change of a stored layout, naming the reshard that makes it safely."""
    if current.in_transition:
        raise ReshardRefused(
            f"index {name!r} is in a reshard (routing version {current.version}); "
            "'shardex reshard status' shows it")
    changed = sorted(v for v in set(current.overrides) | set(new.overrides)
                     if current.policy(v) != new.policy(v))
    if not changed:
        raise ReshardRefused(f"index {name!r}: the layout asked for is the one stored "
                             f"(routing version {current.version}): nothing to change")
    if path is not None:
        args = f" --file {shlex.quote(str(path))}"
    else:
        args = "".join(f" --set {shlex.quote(f'{v}={_policy_arg(new.policy(v))}')}"
                       for v in changed)
    args += "".join(f" --tier {shlex.quote(f'{tier}={where}')}"
                    for tier, where in given_tiers().items())
    raise ReshardRefused(
        f"index {name!r} already has a routing record, which clients cache: changing its "
        "layout here would hide the entries they keep writing to the old one. Change it "
        "through the reshard states: shardex reshard start --store "
        f"{shlex.quote(uri)} --index {shlex.quote(name)}{args}")


def _policy_arg(policy: ShardPolicy) -> str:
    return f"{policy.shards}:{policy.strategy}" + ("" if policy.tier is None
                                                   else f"@{policy.tier}")


async def _refuse_hidden_entries(index: Any, current: Routing, new: Routing) -> None:
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
