"""Every command and Python block that README.md and docs/ show runs here, extracted from the files.

A fenced block tagged ``console`` holds commands, one per line after ``$ `` (a trailing ``\\`` continues
a line); one tagged ``python`` holds Python. Both run, in file order, in one temporary directory per
file in which the repository's ``docs/``, ``tests/``, ``sensor_presets/`` and ``tools/`` are linked,
with this environment's ``rt-lidar`` first on PATH. Python blocks of one file share one interpreter,
as a reader typing them one after another would. A comment line right before a block may say how:

- ``<!-- test: exit=2 -->``: its commands are meant to fail with exit 2 (one line on stderr);
- ``<!-- test: server [ARGS] -->``: ``rt-lidar serve [ARGS]`` runs on 127.0.0.1:41451 meanwhile (one
  server over consecutive blocks that ask for the same);
- ``<!-- test: runs-for=SECONDS -->``: a command that runs until stopped (a viewer, a server): it must
  still be running, healthy, after that long, and is then interrupted.

Two commands do not run in the temporary directory: ``make TARGET`` is checked as ``make -n TARGET`` in
the repository (CI runs ``make test`` itself, and ``make demo`` builds a fresh environment), and ``pip
install -e .`` as a dry run of the same install of the repository (no download, nothing installed).

Every other fence must say what it is (``text``, ``toml``, ``json``, ...): an untagged fence fails,
so no command is shown without either running here or being marked as not a command.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINKED = ("docs", "tests", "sensor_presets", "tools")
RUN_KINDS = ("console", "python")
COMMAND_TIMEOUT_S = 240
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)\s*$")
DIRECTIVE = re.compile(r"^<!--\s*test:\s*(?P<what>.*?)\s*-->\s*$")


@dataclass
class Block:
    """One fenced block of a Markdown file."""

    path: Path
    line: int
    lang: str
    text: str
    directives: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def parse_blocks(path: Path) -> list[Block]:
    """The fenced blocks of ``path`` with the ``<!-- test: ... -->`` directive just above each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, indent = i, len(m["indent"])
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i][indent:])
            i += 1
        directives: dict[str, str] = {}
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        d = DIRECTIVE.match(lines[j].strip()) if j >= 0 else None
        if d:
            for part in re.split(r";\s*", d["what"]):
                key, _, value = part.partition("=") if "=" in part.split()[0] else part.partition(" ")
                directives[key.strip()] = value.strip()
        blocks.append(Block(path, start + 1, m["lang"], "\n".join(body), directives))
        i += 1
    return blocks


def commands(block: Block) -> list[str]:
    """The commands of a console block (``$ `` lines, ``\\`` continuations joined)."""
    out: list[str] = []
    pending = ""
    for raw in block.text.splitlines():
        line = raw.rstrip()
        if pending:
            pending += " " + line.lstrip()
        elif line.startswith("$ "):
            pending = line[2:]
        else:
            continue
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
        else:
            out.append(pending)
            pending = ""
    assert not pending, f"{block.where}: a command ends with a continuation"
    return out


def _environment(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("QT_QPA_PLATFORM", "offscreen" if not env.get("DISPLAY") else "xcb")
    env["HOME"] = str(workdir / "home")
    (workdir / "home").mkdir(exist_ok=True)
    return env


def _start_server(args: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    """``rt-lidar serve ARGS`` on 127.0.0.1:41451, once it says it serves there (not merely once the
    port answers: another program on the port must fail the test, not stand in for our server)."""
    cmd = [sys.executable, "-m", "rt_lidar.cli.main", "serve", "--port", "41451", *args.split()]
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if "127.0.0.1:41451" not in first:
        _stop(proc)
        raise AssertionError(f"rt-lidar serve {args} did not start on 127.0.0.1:41451: {first.strip()}")
    threading.Thread(target=proc.stdout.read, daemon=True).start()  # its later lines: never a full pipe
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    """Interrupt ``proc`` and everything it started (its own process group), then make sure."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=15)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _checked_in_repository(cmd: str) -> list[str] | None:
    """The repository-level check of a ``make`` or ``pip install -e .`` command, None for others."""
    words = cmd.split()
    if words[0] == "make":
        return ["make", "-n", *words[1:]]
    if words[:2] == ["pip", "install"] and words[-1] == ".":
        return [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--no-deps",
            "--no-build-isolation",
            "-e",
            ".",
        ]
    return None


def _run_console(block: Block, env: dict[str, str], cwd: Path) -> None:
    want = int(block.directives.get("exit", "0"))
    runs_for = block.directives.get("runs-for")
    for cmd in commands(block):
        check = _checked_in_repository(cmd)
        if check is not None:
            res = subprocess.run(check, cwd=ROOT, env=env, text=True, capture_output=True, timeout=600)
            assert res.returncode == 0, f"{block.where}: `{cmd}` ({' '.join(check)}): {res.stderr[-3000:]}"
            continue
        if runs_for is not None:
            with tempfile.TemporaryFile("w+") as errfile:
                proc = subprocess.Popen(
                    ["bash", "-c", f"exec {cmd}"],
                    cwd=cwd,
                    env=env,
                    text=True,
                    stdout=subprocess.DEVNULL,
                    stderr=errfile,
                    start_new_session=True,
                )
                time.sleep(float(runs_for))
                alive = proc.poll() is None
                _stop(proc)
                errfile.seek(0)
                err = errfile.read()
            assert alive, f"{block.where}: `{cmd}` ended early (exit {proc.returncode}): {err[-2000:]}"
            assert "Traceback" not in err, f"{block.where}: `{cmd}`: {err[-2000:]}"
            continue
        res = subprocess.run(
            ["bash", "-o", "pipefail", "-c", cmd],
            cwd=cwd,
            env=env,
            text=True,
            capture_output=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        assert res.returncode == want, (
            f"{block.where}: `{cmd}` exited {res.returncode}, the docs mean {want}:\n"
            f"{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
        )
        assert "Traceback" not in res.stderr, f"{block.where}: `{cmd}`:\n{res.stderr[-3000:]}"
        if want == 2:
            lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
            assert len(lines) == 1, f"{block.where}: `{cmd}`: not one line on stderr: {res.stderr}"


PY_WORKER = r"""
import json, sys, traceback
ns = {"__name__": "__main__"}
for line in sys.stdin:
    job = json.loads(line)
    try:
        exec(compile(job["src"], job["where"], "exec"), ns)
        result = {"ok": True}
    except BaseException:
        result = {"ok": False, "error": traceback.format_exc()}
    sys.stdout.flush()
    print("\x00DOC " + json.dumps(result), flush=True)
"""


class PythonSession:
    """One interpreter for a file's Python blocks: each block runs in the namespace the earlier left."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-c", PY_WORKER],
            cwd=cwd,
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def run(self, block: Block) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"where": block.where, "src": block.text}) + "\n")
        self.proc.stdin.flush()
        output: list[str] = []
        for line in self.proc.stdout:
            if line.startswith("\x00DOC "):
                result = json.loads(line[5:])
                assert result["ok"], f"{block.where}: the block failed:\n{result['error']}"
                return
            output.append(line)
        raise AssertionError(f"{block.where}: the interpreter ended: {''.join(output)[-2000:]}")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", DOCS, ids=_doc_id)
def test_every_fence_says_what_it_is(path: Path) -> None:
    untagged = [b.where for b in parse_blocks(path) if not b.lang]
    assert not untagged, f"untagged fences (say console, python, text, toml, ...): {untagged}"


def _runnable(path: Path) -> list[Block]:
    return [b for b in parse_blocks(path) if b.lang in RUN_KINDS]


@pytest.mark.parametrize("path", [p for p in DOCS if _runnable(p)], ids=_doc_id)
def test_documented_examples_run(path: Path, tmp_path: Path) -> None:
    for name in (*LINKED, ".venv"):
        if (ROOT / name).exists():
            (tmp_path / name).symlink_to(ROOT / name)
    env = _environment(tmp_path)
    session: PythonSession | None = None
    server: subprocess.Popen[str] | None = None
    server_args: str | None = None
    try:
        for block in _runnable(path):
            wanted = block.directives.get("server")
            if wanted != server_args:  # a server runs over consecutive blocks that ask for the same one
                if server is not None:
                    _stop(server)
                    server = None
                server_args = wanted
                if wanted is not None:
                    server = _start_server(wanted, env, tmp_path)
            if block.lang == "console":
                assert commands(block), f"{block.where}: a console block with no `$ ` command"
                _run_console(block, env, tmp_path)
            else:
                session = session or PythonSession(env, tmp_path)
                session.run(block)
    finally:
        if session is not None:
            session.close()
        if server is not None:
            _stop(server)
    shutil.rmtree(tmp_path / "home", ignore_errors=True)


def test_parser_reads_directives_and_continuations(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "text\n\n<!-- test: exit=2; server --preset VLP-16 -->\n```console\n$ rt-lidar a \\\n    --b\n"
        "$ rt-lidar c\noutput line\n```\n\n```\nbare\n```\n"
    )
    blocks = parse_blocks(doc)
    assert [b.lang for b in blocks] == ["console", ""]
    assert blocks[0].directives == {"exit": "2", "server": "--preset VLP-16"}
    assert commands(blocks[0]) == ["rt-lidar a --b", "rt-lidar c"]
