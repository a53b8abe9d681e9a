"""The live view of ``diagnose -``: refreshes on a fake clock from fed input, the final report."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from shardex.capacity import CEILINGS
from shardex.cli import cli
from shardex.commands import diagnose as command
from shardex.errors import InvalidInput, InvalidLog
from shardex.heat.live import FileFeed, PipeFeed, watch
from shardex.heat.report import diagnose_reader
from shardex.heat.stream import StreamReader
from tests.heat_samples import BASE

HEADER = "timestamp,key,op,units\n"


def second(s: int, pending: int = 12) -> list[str]:
    """One second of log lines: PENDING written ``pending`` times at 100 units."""
    return [f"{BASE + s},PENDING,write,100\n"] * pending + [f"{BASE + s},SHIPPED,write,50\n"]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Scripted:
    """A Feed that hands over scripted lines, letting scripted time pass on the clock."""

    def __init__(self, clock: Clock, script: list[tuple[float, list[str]]]) -> None:
        self._clock = clock
        self._script = list(script)

    def next(self, timeout: float) -> list[str] | None:
        if not self._script:
            return None
        at, lines = self._script[0]
        if at > self._clock.now + timeout:  # nothing arrives in time: the wait times out
            self._clock.now += timeout
            return []
        self._clock.now = max(self._clock.now, at)
        self._script.pop(0)
        return lines


def reader() -> StreamReader:
    return StreamReader(ceiling=CEILINGS["dynamodb"], name="<stdin>")


def test_refreshes_come_every_few_seconds_even_when_input_is_quiet() -> None:
    clock = Clock()
    script = [(0.0, [HEADER, *second(0)]), (0.5, second(1)), (7.2, second(2, pending=30))]
    seen: list[tuple[float, int, float]] = []
    stream = reader()

    def refresh() -> None:
        top = diagnose_reader(stream).profile.top[0]
        seen.append((clock.now, stream.heat.rows, top.peak_units_per_s))

    watch(Scripted(clock, script), stream, every=2.0, clock=clock, refresh=refresh)
    # at 2, 4 and 6 s nothing new arrived but the view still refreshed; the last rows
    # came at 7.2 s and were counted by the end of input (no refresh was due by then)
    assert seen == [(2.0, 26, 1200.0), (4.0, 26, 1200.0), (6.0, 26, 1200.0)]
    assert stream.heat.rows == 57
    assert diagnose_reader(stream).profile.top[0].peak_units_per_s == 3000.0


def test_a_refresh_that_fell_behind_is_skipped_not_repeated() -> None:
    clock = Clock()
    stream = reader()
    count = []
    script = [(0.0, [HEADER]), (9.5, second(0)), (9.6, second(1))]
    watch(Scripted(clock, script), stream, every=1.0, clock=clock,
          refresh=lambda: count.append(clock.now))
    assert count == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    with pytest.raises(InvalidInput, match="--every"):
        watch(Scripted(clock, []), stream, every=0, clock=clock, refresh=lambda: None)


def test_the_current_second_shows_before_it_closes() -> None:
    stream = reader()
    stream.feed([HEADER, *second(0, pending=5)])
    stream.flush()
    assert diagnose_reader(stream).profile.top[0].peak_units_per_s == 500.0
    stream.feed(second(0, pending=5))  # the same second goes on
    stream.flush()
    assert diagnose_reader(stream).profile.top[0].peak_units_per_s == 1000.0
    stream.finish()
    assert diagnose_reader(stream).profile.top[0].peak_units_per_s == 1000.0


def test_a_malformed_row_is_named_by_its_line_across_batches() -> None:
    stream = StreamReader(ceiling=CEILINGS["dynamodb"], name="s.csv", batch=5)
    stream.feed([HEADER, *second(0), "\n"])

    def rest() -> None:
        stream.feed([f"{BASE},A,erase,1\n", *second(1)])
        stream.finish()

    with pytest.raises(InvalidLog) as caught:
        rest()
    assert (caught.value.line, caught.value.column) == (16, "op")


def test_a_pipe_feed_splits_lines_and_characters_across_reads() -> None:
    read, write = os.pipe()
    feed = PipeFeed(read, "<stdin>")
    try:
        assert feed.next(0.0) == []
        os.write(write, b"a,b\nc")
        assert feed.next(0.0) == ["a,b\n"]
        os.write(write, "\u00e9,d\n".encode()[:1])  # half of a two-byte character
        assert feed.next(0.0) == []
        os.write(write, "\u00e9,d\n".encode()[1:] + b"last")
        assert feed.next(0.0) == ["c\u00e9,d\n"]
        os.close(write)
        write = -1
        assert feed.next(0.0) == ["last"]
        assert feed.next(0.0) is None
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)
    read, write = os.pipe()
    os.write(write, b"\xff\xfe\n")
    os.close(write)
    with pytest.raises(InvalidLog, match="not UTF-8"):
        PipeFeed(read, "<stdin>").next(0.0)
    os.close(read)


def test_a_pipe_feed_names_the_byte_and_line_that_is_not_utf8_across_reads() -> None:
    """The offset counts the bytes of earlier reads and of a character split between two."""
    read, write = os.pipe()
    feed = PipeFeed(read, "<stdin>")
    try:
        os.write(write, b"a,b\nc" + "\u00e9".encode()[:1])  # bytes 0-5, half a character
        assert feed.next(0.0) == ["a,b\n"]
        os.write(write, "\u00e9".encode()[1:] + b"\nd\xff\n")  # the bad byte is byte 9
        with pytest.raises(InvalidLog) as caught:
            feed.next(0.0)
    finally:
        os.close(read)
        os.close(write)
    assert str(caught.value) == "<stdin>:3: is not UTF-8 text (invalid start byte at byte 9)"


@pytest.mark.parametrize("how", ["stdin", "--stream"])
def test_stdin_names_the_byte_and_line_that_is_not_utf8(tmp_path: Path, how: str) -> None:
    """On stdin a byte that is not UTF-8 was named without its place ('<stdin>: is not
    UTF-8 text: invalid start byte'), where a file named its byte: a long log's bad byte
    is named by its byte and line, as the file's is, on stdin and --stream alike."""
    data = "".join([HEADER, *(line for s in range(400) for line in second(s))]).encode()
    bad = data + f"{BASE},PEND\xffING,write,1\n".encode("latin-1") + b"x\n"
    path = tmp_path / "bad.csv"
    path.write_bytes(bad)
    args = ["diagnose", "-"] if how == "stdin" else ["diagnose", "--stream", str(path)]
    result = CliRunner().invoke(cli, args, input=bad if how == "stdin" else None)
    assert isinstance(result.exception, InvalidLog), result.output  # exit 2 from main
    shown = "<stdin>" if how == "stdin" else str(path)
    line, at = data.count(b"\n") + 1, bad.index(b"\xff")
    assert str(result.exception) == (f"{shown}:{line}: is not UTF-8 text (invalid start byte "
                                     f"at byte {at})")


# -- the command ----------------------------------------------------------------------------

@pytest.fixture
def ticking(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The command's clock, one second further at every look."""
    clock = Clock()

    def tick() -> float:
        clock.now += 1.0
        return clock.now

    monkeypatch.setattr(command, "_clock", tick)
    return clock


def log_file(tmp_path: Path, seconds: int = 6) -> Path:
    path = tmp_path / "live.csv"
    path.write_text(HEADER + "".join(line for s in range(seconds) for line in second(s)))
    return path


def test_json_lines_a_refresh_then_the_final_report(tmp_path: Path, ticking: Clock,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FileFeed, "__init__", _small_chunks)
    result = CliRunner().invoke(cli, ["diagnose", "--stream", str(log_file(tmp_path)),
                                      "--every", "2", "--json"])
    assert result.exit_code == 0, result.output
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(docs) >= 3
    assert all(d["schema"] == "shardex.diagnose/1" for d in docs)
    assert [d["live"]["final"] for d in docs] == [False] * (len(docs) - 1) + [True]
    rows = [d["rows"] for d in docs]
    assert rows == sorted(rows)
    assert rows[-1] == 78
    assert docs[-1]["recommendation"]["shards"] == {"PENDING": 2}


_FEED_INIT = FileFeed.__init__


def _small_chunks(self: FileFeed, stream: Any, name: str, *, chunk: int = 0) -> None:
    _FEED_INIT(self, stream, name, chunk=1)  # a line a call: the fake clock ticks between


def test_a_table_a_refresh_when_not_on_a_terminal(tmp_path: Path, ticking: Clock,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FileFeed, "__init__", _small_chunks)
    result = CliRunner().invoke(cli, ["diagnose", "--stream", str(log_file(tmp_path)),
                                      "--every", "3"], terminal_width=120)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.count("live: refresh") >= 2
    assert "(Ctrl-C for the full report)" in out
    assert "recommendation: random_suffix" in out


def test_ctrl_c_still_prints_the_report_of_what_was_read(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def interrupted(feed: object, stream: StreamReader, **_: object) -> None:
        stream.feed([HEADER, *second(0), *second(1)])
        calls.append(stream)
        raise KeyboardInterrupt

    monkeypatch.setattr("shardex.heat.live.watch", interrupted)
    result = CliRunner().invoke(cli, ["diagnose", "-"], input="", terminal_width=150)
    assert result.exit_code == 0, result.output
    assert calls
    out = result.stdout
    assert "interrupted: the report covers what was read until then" in out
    assert "26 rows" in out
    assert "PENDING: N=1 → 2" in out


def test_stdin_in_a_pipe(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["diagnose", "-", "--json"],
                                input=HEADER + "".join(second(0)))
    assert result.exit_code == 0, result.output
    final = json.loads(result.stdout.splitlines()[-1])
    assert final["live"]["final"] is True
    assert final["rows"] == 13
