"""A real prorl host and its inference simulator for the client tests.

The binaries come from PRORL_BIN (``make`` passes its bin/), else they are
built from this checkout with ``go build``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

TASKS = """{"id":"t-add","question":"What is 17 + 25?","answer":"42"}
{"id":"t-frac","question":"Compute 1/2 + 1/3.","answer":"\\\\frac{5}{6}"}
"""


@dataclass
class Host:
    url: str
    sim: str
    dir: Path
    sim_pid: int


def _binaries(tmp: Path) -> Path:
    given = os.environ.get("PRORL_BIN")
    if given and (Path(given) / "prorl-host").exists() and (Path(given) / "plugins" / "prorl-math").exists():
        return Path(given)
    out = tmp / "bin"
    for name, pkg in {
        "prorl-host": "./cmd/prorl-host",
        "prorl-simllm": "./cmd/prorl-simllm",
        "plugins/prorl-math": "./plugins/math",
    }.items():
        subprocess.run(["go", "build", "-o", str(out / name), pkg], cwd=REPO, check=True)
    return out


def _wait_file(path: Path, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text().strip()
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        time.sleep(0.02)
    raise TimeoutError(path)


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log.open("wb"), start_new_session=True)


@pytest.fixture(scope="session")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    d = tmp_path_factory.mktemp("prorl")
    bin_dir = _binaries(d)
    (d / "tasks.jsonl").write_text(TASKS)
    sim = _start(
        [
            str(bin_dir / "prorl-simllm"),
            "--listen",
            "127.0.0.1:0",
            "--addr-file",
            str(d / "sim.addr"),
            "--answers",
            str(d / "tasks.jsonl"),
            "--think-turns",
            "1",
            "--token-latency",
            "2ms",
            "--correct-rate",
            "1",
            "--log",
            str(d / "sim-requests.jsonl"),
        ],
        d / "sim.log",
    )
    procs = [sim]
    try:
        sim_url = "http://" + _wait_file(d / "sim.addr", sim)
        (d / "host.toml").write_text(f"""[server]
listen = "127.0.0.1:0"
data_dir = "{d}/data"
shutdown_timeout = "5s"
[pipeline]
run_workers = 2
[sandbox]
driver = "disabled"
[[backends.static]]
url = "{sim_url}"
[plugins.math]
enabled = true
path = "{bin_dir}/plugins/prorl-math"
start_timeout = "20s"
[plugins.math.config]
python = false
max_turns = 6
""")
        h = _start(
            [
                str(bin_dir / "prorl-host"),
                "serve",
                "--config",
                str(d / "host.toml"),
                "--addr-file",
                str(d / "host.addr"),
            ],
            d / "host.log",
        )
        procs.append(h)
        url = "http://" + _wait_file(d / "host.addr", h)
        yield Host(url=url, sim=sim_url, dir=d, sim_pid=sim.pid)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
        if sys.exc_info()[0] is not None:
            for log in ("host.log", "sim.log"):
                print((d / log).read_text()[-3000:], file=sys.stderr)


MATH = {"domain": "math", "question": "What is 17 + 25?", "answer": "42"}
