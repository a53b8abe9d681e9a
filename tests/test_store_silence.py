"""A store that takes requests and does not answer them: ``Meter.quiet`` counts how long,
and a command says so while it waits (``shardex.clock.answered``, ``run_noting``).

On DynamoDB behind a proxy that stopped answering, ``reshard status`` (and the first reads
of ``reshard run``, before its progress) waited in silence for 30 s timeouts tried again:
minutes with nothing said.
"""

from __future__ import annotations

import asyncio
import re
import types
from typing import Any

import pytest

from shardex.cli import main
from shardex.clock import LoopClock, answered
from shardex.sim.clock import run_virtual
from shardex.stores.memory import MemoryStore


class Silent(MemoryStore):
    """Requests sent before ``answers_at`` (virtual seconds) are answered only then."""

    answers_at = 0.0

    def _send(self, rec: Any, nbytes: int) -> Any:
        now = self.clock.now()
        if now >= self.answers_at:
            return super()._send(rec, nbytes)
        rec.request()  # sent, and not answered until then
        return self.clock.sleep(self.answers_at - now)


def _quiet(store: MemoryStore) -> float:
    return store.meter.quiet(store.clock.now())


def test_quiet_counts_from_the_first_request_left_unanswered() -> None:
    async def main() -> None:
        store = Silent(seed=1)
        await store.locate("orders", "a")
        assert (_quiet(store), store.meter.in_flight) == (0.0, 0)  # answered
        store.answers_at = 10.0
        first = asyncio.ensure_future(store.locate("orders", "a"))
        await asyncio.sleep(3.0)
        second = asyncio.ensure_future(store.locate("orders", "b"))
        await asyncio.sleep(2.0)
        # from the first request, not the latest one
        assert (_quiet(store), store.meter.in_flight) == (pytest.approx(5.0), 2)
        await asyncio.gather(first, second)
        assert (_quiet(store), store.meter.in_flight) == (0.0, 0)

    run_virtual(main())


def test_quiet_goes_on_through_requests_that_found_no_answer() -> None:
    """A request that timed out (Unavailable) is tried again after a backoff, with
    nothing in flight meanwhile: the store has still not answered since the first."""
    async def main() -> None:
        store = Silent(seed=1)
        store._unavailable_rate, store._faulty = 1.0, True
        for _ in range(3):
            with pytest.raises(Exception, match="did not answer"):
                await store.locate("orders", "a")
            await asyncio.sleep(1.0)
        assert store.meter.in_flight == 0
        assert _quiet(store) > 3.0
        store._unavailable_rate, store._faulty = 0.0, False
        await store.locate("orders", "a")
        assert _quiet(store) == 0.0

    run_virtual(main())


def test_a_request_given_up_leaves_the_store_not_waited_on() -> None:
    async def main() -> None:
        store = Silent(seed=1)
        store.answers_at = 100.0
        asked = asyncio.ensure_future(store.locate("orders", "a"))
        await asyncio.sleep(4.0)
        assert _quiet(store) == pytest.approx(4.0)
        asked.cancel()
        await asyncio.gather(asked, return_exceptions=True)
        await asyncio.sleep(4.0)
        assert (_quiet(store), store.meter.in_flight) == (0.0, 0)

    run_virtual(main())


def test_notes_while_the_store_is_silent_and_again_after_it_answered() -> None:
    said: list[tuple[float, str]] = []

    async def main() -> None:
        store, clock = Silent(seed=1), LoopClock()

        async def work() -> None:
            for answers_at in (20.0, 30.0):
                store.answers_at = clock.now() + answers_at
                await store.locate("orders", "a")  # silent for that long, then answered

        await answered(work(), clock, 2.0, lambda note: said.append((clock.now(), note)),
                       quiet=lambda: _quiet(store), tick=0.5)

    run_virtual(main())
    notes = [note for _, note in said]
    # 2, 4, 8 and 16 s of the first silence, then over again for the second
    assert notes == [f"no answer from the store for {s} s" for s in (2, 4, 8, 16, 2, 4, 8, 16)]
    assert [round(at) for at, _ in said] == [2, 4, 8, 16, 22, 24, 28, 36]


def test_no_notes_once_someone_else_says_them() -> None:
    said: list[str] = []

    async def main() -> None:
        store, clock = Silent(seed=1), LoopClock()
        store.answers_at = 30.0
        began = clock.now()
        await answered(store.locate("orders", "a"), clock, 2.0, said.append,
                       quiet=lambda: _quiet(store), until=lambda: clock.now() - began > 5.0,
                       tick=0.5)

    run_virtual(main())
    assert said == [f"no answer from the store for {s} s" for s in (2, 4)]


def test_a_command_says_the_store_does_not_answer(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """reshard status on a store that answers nothing for 9 s: three notes on stderr, then
    the status; the command line runs on virtual time here."""
    import shardex.commands.connection as connection
    import shardex.commands.reshard as reshard_command

    def silent(uri: str, connection: Any) -> MemoryStore:
        store = Silent(seed=1)
        store.answers_at = 9.0
        return store

    monkeypatch.setattr(reshard_command, "open_with", silent)
    monkeypatch.setattr(connection, "QUIET", 2.0)  # as in use (tests run at a minute)
    monkeypatch.setattr(asyncio, "run", run_virtual)
    main(["reshard", "status", "--store", "memory://", "--index", "orders"])
    out, err = capsys.readouterr()
    assert "no reshard under way" in out
    notes = err.strip().splitlines()
    assert len(notes) == 3, err
    assert all(re.fullmatch(r"no answer from the store for \d+ s; still waiting \(Ctrl-C "
                            r"stops\)", note) for note in notes), notes
    assert [int(note.split()[6]) for note in notes] == [2, 4, 8], notes


def test_an_adoption_s_own_requests_count_on_the_store_s_meter() -> None:
    """An adoption's Scan, UpdateItem and DescribeTable go to the DynamoDB client straight,
    not through a Recorder: the meter did not see them, so a backfill whose store stopped
    answering said so only by probing its work records, and what watches a store's meter
    (``reshard run``'s progress, a command's notes) saw a store that answers."""
    from shardex.stores.dynamodb.adopt import GsiAdoptionTools, TableAdoptionTools
    from shardex.stores.dynamodb.client import DynamoDBClient
    from shardex.stores.metered import Meter

    class Held(DynamoDBClient):
        """Answers each call once ``answer`` is set: an empty page, or a table's description."""

        endpoint = "fake://dynamodb"

        def __init__(self) -> None:
            self.answer = asyncio.Event()

        async def call(self, operation: str, **params: Any) -> dict[str, Any]:
            await self.answer.wait()
            return {"Items": [], "Table": {"TableName": params.get("TableName")}}

    async def main() -> None:
        clock, meter, client = LoopClock(), Meter(), Held()
        layout: Any = types.SimpleNamespace(table="orders", id_attribute="id",
                                            key_attribute="shard", sort_attribute="at")
        gsi = GsiAdoptionTools(client, layout, "status", clock=clock, meter=meter)
        table = TableAdoptionTools(client, source="by-status", attribute="status",
                                   base="orders", id_attribute="id", sort_attribute="at",
                                   clock=clock, meter=meter)
        for asked in (lambda: gsi.scan(0, 4, None, 100),
                      lambda: gsi.set_shard("o-1", "PENDING", None, "PENDING#0"),
                      gsi.describe, lambda: table.scan(1, 4, None, 100),
                      lambda: table.value("o-1")):
            client.answer.clear()
            sent = asyncio.ensure_future(asked())
            await asyncio.sleep(3.0)
            assert (meter.quiet(clock.now()), meter.in_flight) == (pytest.approx(3.0), 1)
            client.answer.set()
            await sent
            assert (meter.quiet(clock.now()), meter.in_flight) == (0.0, 0)

    run_virtual(main())
