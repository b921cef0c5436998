"""One strict-file loader for manifests, team files, scripts and config: every problem, with file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from zero.strictfile import FileError, KeyLines, load_model, read_data


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    tokens: int | None = Field(None, ge=1)
    seconds: float | None = Field(None, gt=0)


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    limits: Inner | None = None


class Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str
    prompt: str = ""
    items: list[Item] = Field(default_factory=list)
    section: Inner = Field(default_factory=Inner)


def test_every_problem_is_reported_with_its_line_and_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "doc.toml"
    path.write_text(
        'title = "t"\n'
        'prompt = """\n'
        "tittle = not a key: this line is inside a string\n"
        '"""\n'
        "[section]\n"
        "tokenz = 3\n"
        "seconds = inf\n"
        "[[items]]\n"
        'name = "a"\n'
        "[[items]]\n"
        "nmae = 2\n"
        "limits = { tokens = 0 }\n"
    )
    with pytest.raises(FileError) as caught:
        load_model(Doc, path)
    assert [str(p) for p in caught.value.problems] == [
        f"{path}:6: unknown key 'section.tokenz' (did you mean \"tokens\"?)",
        f"{path}:7: section.seconds: Input should be a finite number",
        f"{path}:10: items.1.name is required",
        f"{path}:11: unknown key 'items.1.nmae' (did you mean \"name\"?)",
        f"{path}:12: items.1.limits.tokens: Input should be greater than or equal to 1",
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'title = "t"\nprompt = "\xff"\n', ":2: is not UTF-8 text (byte 0xff)"),
        (b"title = [\n", ": not valid TOML"),
        (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", ": is nested too deeply to read"),
    ],
)
def test_unreadable_files_are_one_clear_problem(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    with pytest.raises(FileError) as caught:
        read_data(path)
    assert str(caught.value).startswith(f"{path}{message}")


def test_a_folder_or_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(FileError, match="is a folder, not a file"):
        read_data(tmp_path)
    with pytest.raises(FileError, match="cannot read: No such file or directory"):
        read_data(tmp_path / "missing.toml")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(FileError, match="must hold a table of keys"):
        read_data(tmp_path / "list.json")


def test_key_lines_follow_tables_arrays_and_quoted_keys() -> None:
    lines = KeyLines('a = 1\n[prices."llama3.1"]\ninput = 0\n[[m]]\nx = 1\n[[m]]\nx = 2\ny = { z = 1 }\n')
    assert lines.line_of(("a",)) == 1
    assert lines.line_of(("prices", "llama3.1", "input")) == 3
    assert lines.line_of(("m", 1, "x")) == 7 and lines.line_of(("m", 0, "x")) == 5
    assert lines.line_of(("m", 1, "y", "z")) == 8  # inside an inline table: the key's own line
    assert lines.line_of(("nothing",)) is None
    # a table inside an array's element belongs to its last one: [m.t] after the second [[m]]
    lines = KeyLines("[[m]]\nx = 1\n[[m]]\nx = 2\n[m.t]\nk = 3\n")
    assert lines.line_of(("m", 1, "t")) == 5 and lines.line_of(("m", 1, "t", "k")) == 6
    assert lines.line_of(("m", 0, "t")) == 1


def test_a_byte_order_mark_some_editors_begin_a_file_with_is_read_past(tmp_path: Path) -> None:
    # (a team file saved with one was "not valid TOML: Invalid statement (at line 1, column 1)")
    for name, body in (("t.toml", 'name = "t"\n'), ("t.json", '{"name": "t"}')):
        path = tmp_path / name
        path.write_bytes(b"\xef\xbb\xbf" + body.encode())
        assert read_data(path)[0] == {"name": "t"}
