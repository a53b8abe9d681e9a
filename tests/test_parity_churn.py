"""The parity check under an application that keeps writing: a row read just before a
write of its item replaced it is no gap (its item's placement is newer than the row).

A probe kept ten hot items re-put by four writers while a reshard ran: the check read a
row, a re-put landed, then it located the item, and the row differed from the placement
in both passes. The run stopped with "3 mismatched after 3 passes" while every entry was
where readers read it (it did before the write changes of this stop too).
"""

from __future__ import annotations

from shardex.migrate.verify import classify
from shardex.model.entries import Placement, StoredEntry


def _placement(version: int, key: str | None, sort: str = "b") -> Placement:
    entry = None if key is None else StoredEntry(key, sort, "i", {}, version)
    return Placement("i", version, entry, f"t{version}")


def _gaps(row: StoredEntry, key: str, placement: Placement | None) -> list[str]:
    return [g.kind for g in classify("P", "i", [(key, row)], placement,
                                     target_keys={"P#0", "P#1"},
                                     placed=lambda k, item: k == "P#1")]


def test_a_row_older_than_its_item_s_placement_is_a_read_the_item_s_write_overtook() -> None:
    row = StoredEntry("P#1", "a", "i", {}, 3)
    assert _gaps(row, "P#1", _placement(4, "P#1")) == []  # re-put in place, sort changed
    assert _gaps(row, "P#1", _placement(4, None)) == []  # deleted since
    old = StoredEntry("P#5", "a", "i", {}, 3)  # an old-only key: re-filed since
    assert _gaps(old, "P#5", _placement(4, "P#1")) == []
    # as new as the placement, it is held against it as before
    assert _gaps(StoredEntry("P#1", "a", "i", {"x": 1}, 4), "P#1",
                 _placement(4, "P#1", sort="a")) == ["mismatched"]
    assert _gaps(StoredEntry("P#5", "a", "i", {}, 4), "P#5",
                 _placement(4, "P#5", sort="a")) == ["missing"]
    assert _gaps(StoredEntry("P#0", "a", "i", {}, 4), "P#0",
                 _placement(4, "P#0", sort="a")) == ["misplaced"]
    assert _gaps(StoredEntry("P#0", "a", "i", {}, 4), "P#0", None) == ["extra"]
