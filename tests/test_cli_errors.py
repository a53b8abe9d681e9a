"""One error style for diagnose and plan: one line, ``error: ...``, exit 2 for usage, 1 for
a failed operation, and no traceback for any input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardex.cli import main
from tests.heat_samples import BASE


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    code = done.value.code
    return int(code) if isinstance(code, int) else 1, capsys.readouterr().err


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(("args", "code", "message"), [
    (["diagnose"], 2, "Missing argument 'FILES...'"),
    (["diagnose", "x.csv", "--top", "many"], 2, "'many' is not a valid integer"),
    (["diagnose", "x.csv", "--format", "xml"], 2, "'xml' is not one of"),
    (["diagnose", "x.csv", "--nope"], 2, "No such option '--nope'"),
    (["diagnose", "x.csv", "--every", "0", "--stream"], 2, "'--every': 0.0 is not in the range"),
    (["plan"], 2, "give each value's peak"),
    (["plan", "--peak", "P=1", "--amplification", "x"], 2, "is not a valid float"),
])
def test_usage_errors_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              args: list[str], code: int, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.csv").write_text(f"timestamp,key,op,units\n{BASE},A,write,1\n")
    got, err = run(capsys, *args)
    assert got == code
    assert message in one_line(err)


def test_a_plot_in_a_missing_folder_is_refused_with_exit_2(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    """Before the read, naming --plot (it failed after it, exit 1: tests/test_cli_file_inputs)."""
    log = tmp_path / "x.csv"
    log.write_text(f"timestamp,key,op,units\n{BASE},A,write,1\n")
    got, err = run(capsys, "diagnose", str(log), "--plot", str(tmp_path / "no" / "such" / "h.png"))
    assert got == 2
    assert f"--plot {tmp_path}/no/such/h.png: the folder {tmp_path}/no/such does not exist" \
        in one_line(err)


_CONTENT = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    st.lists(st.sampled_from(["timestamp", "key", "op", "units", "bytes", "throttled", "", "1e30",
                              "-1", "nan", "2026-11-30T05:00:00Z", str(BASE), str(BASE * 1000),
                              "read", "write", "A#3", "#p", '"', "\u00e9", "{", "}"]),
             max_size=40).map(lambda cells: "\n".join(
                 ",".join(cells[i:i + 4]) for i in range(0, len(cells), 4)).encode()),
    st.dictionaries(st.sampled_from(["timestamp", "key", "op", "units", "Records",
                                     "Contributors", "KeyLabels"]),
                    st.one_of(st.none(), st.integers(), st.text(max_size=8),
                              st.lists(st.integers(), max_size=3)),
                    max_size=5).map(lambda d: json.dumps(d).encode()),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(content=_CONTENT, packed=st.booleans(), stream=st.booleans())
def test_no_input_makes_a_traceback(tmp_path_factory: pytest.TempPathFactory,
                                    capsys: pytest.CaptureFixture[str], content: bytes,
                                    packed: bool, stream: bool) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "input.log"
    path.write_bytes(gzip.compress(content) if packed else content)
    args = ["diagnose", str(path), "--json"] + (["--stream"] if stream else [])
    code = 0
    try:
        main(args)
    except SystemExit as done:
        code = int(done.code) if isinstance(done.code, int) else -1
    out, err = capsys.readouterr()
    if code:
        assert code in (1, 2), err
        one_line(err)
    else:  # read: the report is a whole JSON document (streamed: one a line, the last final)
        doc = json.loads(out.splitlines()[-1] if stream else out)
        assert doc["schema"] == "shardex.diagnose/1"
