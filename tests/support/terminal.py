"""``zero`` in a pseudo-terminal, read through a screen emulator: what a user would see."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pyte

from support.cli import ZERO

TIMEOUT = 30.0
"""How long a wait may take before it fails: long, since it bounds only a failure (see ``wait_until``)."""

# Escape sequences: CSI (cursor, colours, modes), OSC (titles, ending in BEL or ST), and two-byte ones.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC
    r"|\x1b[()#][0-9A-Za-z]|\x1b[=>78DEHMNOPZc]"  # two bytes
    r"|[\x00-\x08\x0b\x0e-\x1f]"  # other controls
)


class Terminal:
    """A terminal of ``rows`` x ``cols`` running ``zero ARGS``; ``screen()`` is its text now."""

    def __init__(self, *args: str, cwd: Path, rows: int = 50, cols: int = 140, env: dict[str, str] | None = None):
        self.screen_ = pyte.Screen(cols, rows)
        self.screen_.set_mode(pyte.modes.LNM)
        self.stream = pyte.ByteStream(self.screen_)
        self.log = b""  # everything it wrote, to read what scrolled away
        self._read = 0  # how much of the log ``_lines`` holds: the log up to its last newline
        self._lines: list[str] = []
        self._screen: str | None = None  # the screen's text, until more is written
        environ = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows), **(env or {})}
        self.child = pexpect.spawn(ZERO, list(args), cwd=str(cwd), env=environ, dimensions=(rows, cols))
        self.child.delaybeforesend = None  # pexpect waits 50 ms before every send by default

    def pump(self, seconds: float = 0.05) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                data = self.child.read_nonblocking(65536, timeout=max(0.0, min(0.05, deadline - time.monotonic())))
            except pexpect.TIMEOUT:
                data = b""
            except pexpect.EOF:
                return
            if data:
                self._feed(data)
            if time.monotonic() >= deadline:
                return

    def read(self, timeout: float = 0.05) -> None:
        """Read what comes within ``timeout`` seconds, returning as soon as something has: a wait goes on the
        moment the screen changes."""
        try:
            self._feed(self.child.read_nonblocking(65536, timeout=timeout))
        except (pexpect.TIMEOUT, pexpect.EOF):
            return
        while self._pending():
            pass

    def _feed(self, data: bytes) -> None:
        self.log += data
        self._screen = None
        self.stream.feed(data)
        for _ in range(data.count(b"\x1b[6n")):  # a cursor position request: answer as a terminal does
            cursor = self.screen_.cursor
            self.child.send(f"\x1b[{cursor.y + 1};{cursor.x + 1}R")

    def screen(self) -> str:
        if self._screen is None:
            self._screen = "\n".join(line.rstrip() for line in self.screen_.display)
        return self._screen

    def text(self) -> str:
        """All it wrote, control sequences removed (what scrolled off the screen too; a redrawn line
        may show more than once)."""
        end = self.log.rfind(b"\n") + 1  # a line the log ends is read again until it is whole
        if end > self._read:
            self._lines += _plain(self.log[self._read : end])
            self._read = end
        return "\n".join([*self._lines, *_plain(self.log[self._read :])])

    def wait_for(self, needle: str, timeout: float = TIMEOUT, *, everything: bool = False) -> str:
        """Wait until ``needle`` is on the screen (or anywhere in the output, with ``everything``)."""
        return self.wait_until(lambda seen: needle in seen, repr(needle), timeout, everything=everything)

    def wait_until(
        self, shown: Callable[[str], object], what: str, timeout: float = TIMEOUT, *, everything: bool = False
    ) -> str:
        """Wait until ``shown(the screen)`` holds (or ``shown(all the output)``, with ``everything``). ``timeout``
        only bounds a failure: a test goes on the moment the screen says so, however slow the machine."""
        deadline = time.monotonic() + timeout
        while True:
            self.read()
            seen = self.text() if everything else self.screen()
            if shown(seen):
                return seen
            if time.monotonic() > deadline or not self.child.isalive() and not self._pending():
                raise AssertionError(f"{what} never appeared; the screen:\n{self.screen()}")

    def cursor_line(self) -> str:
        """The line the cursor is on (where the shell waits for an answer)."""
        return _row(self.screen_, self.screen_.cursor.y)

    def wait_prompt(self, timeout: float = TIMEOUT) -> str:
        """Wait until the cursor sits on an empty prompt that reads the keyboard: the shell is ready for a
        message."""
        deadline = time.monotonic() + timeout
        while True:
            self.read()
            line = _row(self.screen_, self.screen_.cursor.y)
            if line.startswith("› ") and not line[2:].strip() and self.reading():
                return self.screen()
            if time.monotonic() > deadline:
                raise AssertionError(f"no prompt; the screen:\n{self.screen()}")

    def reading(self) -> bool:
        """Is a prompt reading the keyboard now? A prompt turns bracketed paste on as it starts reading and off
        as it ends: a key typed before (while the history of a resumed session is still drawn, say) would go to
        the terminal's line editing, where a Ctrl-D is lost."""
        return self.log.rfind(b"\x1b[?2004h") > self.log.rfind(b"\x1b[?2004l")

    def _pending(self) -> bool:
        try:
            data = self.child.read_nonblocking(65536, timeout=0)
        except (pexpect.TIMEOUT, pexpect.EOF):
            return False
        self._feed(data)
        return bool(data)

    def type(self, text: str, *, enter: bool = True, settle: float = 0.05) -> None:
        """Type ``text`` (and Enter), then read what comes for ``settle`` seconds. A line entered at a prompt is
        waited for until the prompt took it: a ``wait_prompt`` after it waits for the next prompt, never the one
        the line was typed at (before the terminal echoed it, that one still looked empty)."""
        at_prompt = enter and not text.endswith("\\") and self.reading()  # (a trailing backslash: the line goes on)
        start = len(self.log)
        self.child.send(text)
        if enter:
            self.child.send("\r")
        if at_prompt:
            self.wait_until(lambda _: self.log.find(b"\x1b[?2004l", start) >= 0, "the prompt taking the line")
        self.pump(settle)

    def interrupt(self) -> None:
        self.child.sendintr()

    def close(self) -> int:
        if self.child.isalive():
            self.child.kill(signal.SIGKILL)
        self.child.close()
        return int(self.child.exitstatus if self.child.exitstatus is not None else -(self.child.signalstatus or 0))

    def wait_exit(self, timeout: float = TIMEOUT) -> int:
        deadline = time.monotonic() + timeout
        while self.child.isalive():
            self.read()
            if time.monotonic() > deadline:
                raise AssertionError(f"zero did not exit; the screen:\n{self.screen()}")
        self.pump()
        self.child.close()
        return int(self.child.exitstatus if self.child.exitstatus is not None else 128 + (self.child.signalstatus or 0))


def _plain(data: bytes) -> list[str]:
    """The lines of ``data`` that hold text, control sequences removed."""
    plain = _CONTROL.sub("", data.decode("utf-8", errors="replace")).replace("\r\n", "\n")
    return [line.rstrip() for line in plain.replace("\r", "\n").splitlines() if line.strip()]


def _row(screen: pyte.Screen, y: int) -> str:
    """Row ``y`` of the screen as ``screen.display`` shows it, without drawing the other rows."""
    line = screen.buffer[y]
    return "".join(line[x].data for x in range(screen.columns))
