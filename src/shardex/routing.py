"""Shard policies and routing: where each entry of a logical key is written and read.

Pure: nothing here does I/O. A ``Routing`` is a versioned layout (a default policy and
per-value overrides), an immutable value; the state a writer keeps between writes (the
round-robin turns, ``Turns``) is held by the writer, not by the routing. While a
reshard runs a routing also carries ``previous``, the layout being left, and a
``state`` that says which layout writers follow and which keys readers read:

==========  ===============  ====================================
state       writes follow    reads cover
==========  ===============  ====================================
stable      the layout       the layout
read-both   previous         both layouts (the union of their keys)
write-new   the layout       both layouts
verified    the layout       both layouts
read-new    the layout       the layout
retired     the layout       the layout
==========  ===============  ====================================

``shardex.reshard`` drives a routing through these states one adjacent step at a time
and explains why every read stays complete. ``reshard`` (a ``Transition``) carries the
reshard's own metadata. The routing document (``Routing.to_json``) is what the index
stores in its store; a stable routing's document has the same fields as before states
existed, and a document with ``previous`` but no ``state`` is read as ``write-new``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Literal, get_args

from shardex.adoption import Adoption
from shardex.errors import InvalidInput, InvalidKey, InvalidPolicy, InvalidRouting, brief
from shardex.hashing import shard_of
from shardex.keys import SEPARATOR, encode_shard_key, validate_item_id, validate_value
from shardex.model.entries import MAX_VERSION
from shardex.transition import Transition, fields_of

__all__ = ["MAX_SHARDS", "ROUTING_FORMAT", "Routing", "STATES", "ShardPolicy", "State", "Strategy",
           "Turns", "begin_transition", "check_tier_name"]

Strategy = Literal["hash", "random", "round_robin"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
State = Literal["stable", "read-both", "write-new", "verified", "read-new", "retired"]
STATES: tuple[str, ...] = get_args(State)
# the states in which readers cover both layouts, and the one in which writers follow
# the previous layout
UNION_STATES = frozenset({"read-both", "write-new", "verified"})
MAX_SHARDS = 4096
_PHASES_KEPT = 4096  # values whose read phases a routing keeps worked out
_TIER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
ROUTING_FORMAT = "shardex.routing/1"


def _is_version(version: Any) -> bool:
    """A routing version: an int (not a bool) from 1 to ``MAX_VERSION``, as stores keep it."""
    return type(version) is int and 1 <= version <= MAX_VERSION


@dataclass(frozen=True, slots=True)
class ShardPolicy:
    """How the entries of one logical key spread: over ``shards`` shard keys, by ``strategy``.

    ``hash`` puts an item on ``jump_hash(h64(item_id), shards)``, so the shard can be
    recomputed from the item id; ``random`` and ``round_robin`` spread writes evenly
    whatever the ids, and the index records where each entry went. 1 <= shards <= 4096.
    ``tier`` names the store the value's entries live in (``ShardedIndex(...,
    tiers={name: store})``): None is the index's own store. A tier name is 1 to 64 of
    ``A-Z a-z 0-9 _ . -``, starting with a letter or digit.
    """

    shards: int = 1
    strategy: Strategy = "hash"
    tier: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.shards, bool) or not isinstance(self.shards, int):
            raise InvalidPolicy(f"shards must be an integer, got {self.shards!r}")
        if not 1 <= self.shards <= MAX_SHARDS:
            raise InvalidPolicy(f"shards must be between 1 and {MAX_SHARDS}, got {self.shards}")
        if self.strategy not in STRATEGIES:
            raise InvalidPolicy(
                f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}"
            )
        if self.tier is not None:
            check_tier_name(self.tier, "tier")

    def shard_keys(self, value: str) -> list[str]:
        """Return every shard key of ``value`` under this policy, in shard order."""
        return [encode_shard_key(value, k, self.shards) for k in range(self.shards)]

    def has_key(self, value: str, shard_key: str) -> bool:
        """True if ``shard_key`` is one of ``shard_keys(value)``, without listing them (a
        write's check, where N may be thousands)."""
        if self.shards == 1:
            return shard_key == value
        prefix = value + SEPARATOR
        suffix = shard_key[len(prefix):]
        return shard_key.startswith(prefix) and suffix.isascii() and suffix.isdigit() \
            and str(int(suffix)) == suffix and int(suffix) < self.shards

    def to_dict(self) -> dict[str, Any]:
        # "tier" only when set: a document without tiers reads as it always did
        doc: dict[str, Any] = {"shards": self.shards, "strategy": self.strategy}
        if self.tier is not None:
            doc["tier"] = self.tier
        return doc

    @classmethod
    def from_dict(cls, doc: Any, where: str = "policy") -> ShardPolicy:
        """Build a policy from its document; raise InvalidRouting naming the bad field."""
        fields_of(doc, where, required={"shards"}, optional={"strategy", "tier"})
        try:
            return cls(shards=doc["shards"], strategy=doc.get("strategy", "hash"),
                       tier=doc.get("tier"))
        except InvalidPolicy as exc:
            raise InvalidRouting(f"{where}: {exc}") from exc


@dataclass(frozen=True)
class Routing:
    """A versioned set of policies: ``default`` plus per-value ``overrides``.

    ``previous`` is set only during a transition (a reshard), from the layout being
    left, and ``state`` (one of ``STATES``) says which layout writes follow
    (``writing``) and which keys reads cover (``read_keys``); left out, it is
    ``stable`` without ``previous`` and ``write-new`` with it. ``reshard`` is the
    reshard's metadata (None outside one, or for a bare transition made by
    ``begin_transition``).
    ``adoption`` is an application's plain index being adopted (``shardex.adoption``):
    while it says so, readers read that index instead of this layout's keys. Values in
    ``overrides`` are validated as logical keys.
    """

    default: ShardPolicy = field(default_factory=ShardPolicy)
    overrides: Mapping[str, ShardPolicy] = field(default_factory=dict)
    version: int = 1
    previous: Routing | None = None
    state: State | None = None
    reshard: Transition | None = None
    adoption: Adoption | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.default, ShardPolicy):
            raise InvalidRouting(f"default must be a ShardPolicy, got {self.default!r}")
        if not _is_version(self.version):
            raise InvalidRouting(f"version must be an integer from 1 to 10**38 - 1 (a DynamoDB "
                                 f"number), got {brief(self.version)}")
        if not isinstance(self.overrides, Mapping):
            raise InvalidRouting(
                f"overrides must be a mapping, got {type(self.overrides).__name__}")
        overrides: dict[str, ShardPolicy] = {}
        for value, policy in self.overrides.items():
            try:
                text = validate_value(value)  # a str enum's member: its text
            except InvalidKey as exc:
                raise InvalidRouting(f"overrides: {exc}") from exc
            if not isinstance(policy, ShardPolicy):
                raise InvalidRouting(f"overrides[{value!r}] must be a ShardPolicy, got {policy!r}")
            overrides[text] = policy
        # A read-only private copy: mutating a dict must not re-route live entries.
        object.__setattr__(self, "overrides", MappingProxyType(dict(sorted(overrides.items()))))
        if self.previous is not None and not isinstance(self.previous, Routing):
            raise InvalidRouting(f"previous must be a Routing or None, got {self.previous!r}")
        if self.previous is not None:
            if self.previous.previous is not None:
                raise InvalidRouting("previous: a transition spans exactly two layouts")
            if self.previous.version >= self.version:
                raise InvalidRouting(
                    f"previous.version ({self.previous.version}) must be below "
                    f"version ({self.version})"
                )
        if self.state is None:
            object.__setattr__(self, "state", "stable" if self.previous is None else "write-new")
        elif self.state not in STATES:
            raise InvalidRouting(f"state must be one of {', '.join(STATES)}, got {self.state!r}")
        elif (self.state == "stable") != (self.previous is None):
            raise InvalidRouting(
                f"state {self.state!r} " + ("cannot have a previous layout" if self.previous
                                            else "needs the previous layout it moves from"))
        if self.reshard is not None:
            if not isinstance(self.reshard, Transition):
                raise InvalidRouting(f"reshard must be a Transition or None, "
                                     f"got {self.reshard!r}")
            if self.previous is None:
                raise InvalidRouting("reshard: a stable routing has no reshard under way")
        if self.adoption is not None:
            if not isinstance(self.adoption, Adoption):
                raise InvalidRouting(f"adoption must be an Adoption or None, "
                                     f"got {self.adoption!r}")
            if self.previous is not None and self.adoption.active:
                raise InvalidRouting("adoption: a reshard and an adoption cannot run at once")


    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by its fields, the overrides as a plain dict (a mapping proxy does not
        pickle): a routing crosses to another process as it is."""
        return (Routing, (self.default, dict(self.overrides), self.version, self.previous,
                          self.state, self.reshard, self.adoption))
    def __hash__(self) -> int:
        return hash(self.to_json())

    # -- decisions -------------------------------------------------------------------

    def policy(self, value: str) -> ShardPolicy:
        """Return the policy this layout gives ``value`` (during a transition, the target).

        Writes follow ``writing.policy(value)``, which is the previous layout's in
        ``read-both``.
        """
        try:
            return self.overrides.get(value, self.default)
        except TypeError:  # unhashable: no value at all
            raise InvalidInput(f"a value is text, got {brief(value)}") from None

    @property
    def in_transition(self) -> bool:
        """True while a reshard moves from ``previous`` to this layout."""
        return self.previous is not None

    @cached_property
    def writing(self) -> Routing:
        """The layout writes follow in this state, as a stable routing of its own.

        The previous layout in ``read-both``, this layout otherwise.
        """
        if self.previous is None:
            return self
        if self.state == "read-both":
            return self.previous
        return self._stripped()

    def reads_both(self, value: str) -> bool:
        """True if reads of ``value`` cover two layouts whose keys differ in this state."""
        return self.previous is not None and self.state in UNION_STATES \
            and self.previous.policy(value) != self.policy(value)

    def shard_key(self, value: str, item_id: str, *, rng: random.Random | None = None,
                  turns: Turns | None = None) -> str:
        """Return the shard key a new entry of ``value`` for ``item_id`` is written to.

        ``rng`` drives the ``random`` strategy and ``turns`` the ``round_robin`` one; a
        value whose policy needs one raises InvalidInput without it. Raises InvalidKey
        for a value or item id that cannot be stored.
        """
        validate_value(value)
        validate_item_id(item_id)
        policy = self.writing.policy(value)
        if policy.shards == 1:
            return value
        if policy.strategy == "hash":
            shard = shard_of(item_id, policy.shards)
        elif policy.strategy == "random":
            if rng is None:
                raise InvalidInput(f"{value!r} is sharded at random: pass rng=random.Random()")
            shard = rng.randrange(policy.shards)
        else:
            if turns is None:
                raise InvalidInput(f"{value!r} is sharded round robin: pass turns=Turns(rng)")
            shard = turns.take(value, policy.shards)
        return encode_shard_key(value, shard, policy.shards)

    def read_keys(self, value: str) -> list[str]:
        """Return every shard key a complete read of ``value`` must query.

        In ``read-both``, ``write-new`` and ``verified`` this is the union of both
        layouts' keys, this layout's first, so a reader misses no entry wherever the
        reshard has put it; otherwise this layout's keys alone.
        """
        validate_value(value)
        keys = self.policy(value).shard_keys(value)
        if self.previous is not None and self.state in UNION_STATES:
            seen = set(keys)
            keys += [k for k in self.previous.policy(value).shard_keys(value) if k not in seen]
        return keys

    def read_phases(self, value: str) -> tuple[list[str], list[str]]:
        """The shard keys a complete read of ``value`` queries, as two phases: (first, then).

        Where reads cover both layouts and they differ for ``value``, ``first`` is the
        layout writes do not follow and ``then`` the one they do: entries only ever move
        toward the layout written (a reshard's mover re-places them there), so a read
        that covers each position on ``first`` before ``then`` finds an entry moved
        meanwhile on one of them. Otherwise ``first`` is empty.

        A key of both layouts is read in both phases, unless both hash: then it is in one
        phase only. Jump hash moves an entry of ``N`` shards, grown to ``M``, either
        nowhere or to a key only ``M`` has, so growing, a key of both only loses entries
        and is read in ``first`` alone; shrinking, entries move from keys only the larger
        layout has to their own shard of the smaller, so a key of both only gains entries
        and is read in ``then`` alone.

        Worked out once a value (a page of a listing asks for it, twice): the routing
        does not change.
        """
        known = self.__dict__.get("_phases_of")
        if known is None or len(known) >= _PHASES_KEPT:
            known = {}
            object.__setattr__(self, "_phases_of", known)  # frozen: its fields stay as they are
        try:
            found = known.get(value)
        except TypeError:  # unhashable: no value, which _phases says
            found = None
        if found is None:
            first, then = self._phases(value)
            found = known[value] = (tuple(first), tuple(then))
        return list(found[0]), list(found[1])

    def _phases(self, value: str) -> tuple[list[str], list[str]]:
        """``read_phases`` worked out, the value checked first (InvalidKey: not kept)."""
        validate_value(value)
        if not self.reads_both(value):
            return [], self.policy(value).shard_keys(value)
        assert self.previous is not None
        other = self if self.writing is self.previous else self.previous
        left, written = other.policy(value), self.writing.policy(value)
        first, then = left.shard_keys(value), written.shard_keys(value)
        if left.strategy == written.strategy == "hash" and left.tier == written.tier:
            if left.shards < written.shards:
                shared = set(first)
                then = [k for k in then if k not in shared]
            else:
                shared = set(then)
                first = [k for k in first if k not in shared]
        return first, then

    def tier(self, value: str) -> str | None:
        """The tier ``value``'s writes go to in this state (None: the index's own store)."""
        return self.writing.policy(value).tier

    def tiers(self) -> set[str]:
        """Every tier this routing names, in either layout (the index's own store left out)."""
        layouts = [self] if self.previous is None else [self, self.previous]
        return {p.tier for layout in layouts
                for p in (layout.default, *layout.overrides.values()) if p.tier is not None}

    def is_current_key(self, value: str, shard_key: str) -> bool:
        """True if ``shard_key`` is one of the keys ``value`` is written to now."""
        return self.writing.policy(value).has_key(value, shard_key)

    def _stripped(self) -> Routing:
        return Routing(default=self.default, overrides=self.overrides, version=self.version)

    # -- the routing document --------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"format": ROUTING_FORMAT, **self._layout_dict()}
        doc["previous"] = None if self.previous is None else self.previous._layout_dict()
        if self.previous is not None:
            doc["state"] = self.state
            doc["reshard"] = None if self.reshard is None else self.reshard.to_dict()
        if self.adoption is not None:
            doc["adoption"] = self.adoption.to_dict()
        return doc

    def _layout_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "default": self.default.to_dict(),
            "overrides": {v: p.to_dict() for v, p in self.overrides.items()},
        }

    def to_json(self) -> str:
        """Return the routing document as compact, key-sorted JSON."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, doc: Any) -> Routing:
        """Validate a routing document; raise InvalidRouting naming the field at fault."""
        fields_of(doc, "routing", required={"format", "version", "default"},
                       optional={"overrides", "previous", "state", "reshard", "adoption"})
        if doc["format"] != ROUTING_FORMAT:
            raise InvalidRouting(
                f"routing.format: expected {ROUTING_FORMAT!r}, got {doc['format']!r}"
            )
        previous = doc.get("previous")
        prev = None
        if previous is not None:
            fields_of(previous, "routing.previous", required={"version", "default"},
                           optional={"overrides"})
            prev = cls._layout_from(previous, "routing.previous")
        current = cls._layout_from(doc, "routing")
        state = doc.get("state")
        if state is not None and state not in STATES:
            raise InvalidRouting(f"routing.state: expected one of {', '.join(STATES)}, "
                                 f"got {state!r}")
        reshard = doc.get("reshard")
        meta = None if reshard is None else Transition.from_dict(reshard)
        adopting = doc.get("adoption")
        adoption = None if adopting is None else Adoption.from_dict(adopting)
        try:
            return cls(default=current.default, overrides=current.overrides,
                       version=current.version, previous=prev, state=state, reshard=meta,
                       adoption=adoption)
        except InvalidRouting as exc:
            raise InvalidRouting(f"routing: {exc}") from None

    @classmethod
    def _layout_from(cls, doc: Mapping[str, Any], where: str) -> Routing:
        version = doc["version"]
        if not _is_version(version):
            raise InvalidRouting(f"{where}.version: expected an integer from 1 to 10**38 - 1, "
                                 f"got {brief(version)}")
        default = ShardPolicy.from_dict(doc["default"], f"{where}.default")
        raw = doc.get("overrides", {})
        if not isinstance(raw, dict):
            raise InvalidRouting(f"{where}.overrides: expected an object, got {type(raw).__name__}")
        overrides: dict[str, ShardPolicy] = {}
        for value, policy_doc in raw.items():
            try:
                validate_value(value)
            except InvalidKey as exc:
                raise InvalidRouting(f"{where}.overrides: {exc}") from exc
            overrides[value] = ShardPolicy.from_dict(policy_doc, f"{where}.overrides[{value!r}]")
        return cls(default=default, overrides=overrides, version=version)

    @classmethod
    def from_json(cls, text: str | bytes) -> Routing:
        """Parse and validate a routing document; raise InvalidRouting if it is broken."""
        try:
            doc = json.loads(text)
        except (ValueError, TypeError) as exc:
            raise InvalidRouting(f"routing document is not valid JSON: {exc}") from exc
        except RecursionError:
            raise InvalidRouting("routing document is nested too deeply to be one") from None
        return cls.from_dict(doc)


def begin_transition(current: Routing, changes: Mapping[str, ShardPolicy | None], *,
                     default: ShardPolicy | None = None,
                     reshard: Transition | None = None) -> Routing:
    """A transition from ``current`` to a layout with ``changes`` (None drops an override).

    The transition starts in ``read-both``: readers cover both layouts while writers
    still follow the current one, so a client that has not yet seen the change (and reads
    that layout alone) misses nothing. Pure, and only a value: a stored layout changes
    through the reshard states (``shardex reshard start``, ``shardex.reshard``), never
    by storing a routing made here.
    """
    if current.previous is not None:
        raise InvalidRouting(
            f"routing version {current.version} is already in a transition; finish or roll "
            "it back")
    if current.adoption is not None and current.adoption.stage != "complete":
        again = current.adoption.stage == "rolled-back"  # no adoption is under way to finish
        raise InvalidRouting(
            f"index adoption {current.adoption.id} is {current.adoption.stage}: readers read "
            f"{current.adoption.source!r}; " + ("adopt it again ('shardex adopt start'), "
                                                "cutover and complete" if again else
                                                "finish it ('shardex adopt cutover', "
                                                "'complete')") + " before resharding")
    if not isinstance(changes, Mapping):
        raise InvalidRouting(f"changes is a mapping of logical key to ShardPolicy or None "
                             f"(None drops an override), got {brief(changes)}")
    overrides = dict(current.overrides)
    for value, policy in changes.items():
        if policy is None:
            overrides.pop(value, None)
        else:
            overrides[value] = policy
    return Routing(default=default or current.default, overrides=overrides,
                   version=current.version + 1, previous=current._stripped(),
                   state="read-both", reshard=reshard, adoption=current.adoption)


def check_tier_name(name: Any, where: str) -> str:
    """Return ``name`` if it is a valid tier name; else InvalidPolicy naming ``where``."""
    if type(name) is not str or _TIER_NAME.fullmatch(name) is None:
        raise InvalidPolicy(f"{where} must be a tier name (1 to 64 of A-Z, a-z, 0-9, '_', '.' "
                            f"and '-', starting with a letter or digit), got {name!r}")
    return name


class Turns:
    """Round-robin turns: per logical key, the shard the next write goes to.

    Held by a writer (each ShardedIndex has its own), never by a Routing. Each writer
    starts every value at an offset drawn from ``rng``, so that many writers do not all
    begin on shard 0; then consecutive writes take consecutive shards, wrapping around.
    """

    __slots__ = ("_next", "_rng")

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._next: dict[str, int] = {}

    def take(self, value: str, shards: int) -> int:
        """Return the shard (in ``[0, shards)``) of the next write of ``value``."""
        turn = self._next.get(value)
        if turn is None:
            turn = self._rng.randrange(shards)
        self._next[value] = turn + 1
        return turn % shards
