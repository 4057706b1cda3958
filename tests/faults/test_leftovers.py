"""What a killed run left running is stopped before the next run's first trial.

A run killed with SIGKILL cannot stop its engine. Its container (found by the ``tune.*``
labels) or its engine process (noted in the trial's folder) used to keep the port and the
devices, so every trial of the next run failed on them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from launchers import _cleanup as cleanup
from tests.faults.faulty_engine import FAULTY_ENGINE
from tests.faults.procs import finish, tune
from tests.launchers.helpers import free_port, wait_listening
from tests.tuner.conftest import write_yaml
from tests.tuner.run.test_worker import wait_for
from tuner.errors import TunerError
from tuner.run.leftovers import NOTE, clear_leftovers
from tuner.run.study import RunOptions, run_study


@dataclass
class Container:
    name: str
    labels: dict[str, str]
    status: str = "running"
    removed: bool = False

    def remove(self, force: bool = False) -> None:
        self.removed = True


@dataclass
class Docker:
    """The docker SDK client as far as a study uses it; no image is pulled here."""

    held: list[Container] = field(default_factory=list)

    @property
    def containers(self) -> Docker:
        return self

    @property
    def images(self) -> Docker:
        return self

    def get(self, image: str) -> None:
        from docker.errors import ImageNotFound

        raise ImageNotFound(image)

    def list(self, all: bool = False, filters: dict[str, list[str]] | None = None) -> list[Any]:
        wanted = (filters or {}).get("label", [])
        return [c for c in self.held if all and all_labels(c, wanted) and not c.removed]


def all_labels(container: Container, wanted: list[str]) -> bool:
    pairs = [w.partition("=") for w in wanted]
    return all(k in container.labels and (not v or container.labels[k] == v) for k, _, v in pairs)


def dead_owner() -> str:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}"


def started_at(pid: int) -> int:
    """A process's start time, as ``/proc/PID/stat`` gives it (field 22)."""
    return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[19])


def container(study: str, owner: str, trial: str = "0") -> Container:
    labels = {cleanup.MANAGED: "1", cleanup.STUDY: study, cleanup.OWNER: owner, "tune.trial": trial}
    return Container(f"tune-{study}-{trial}", labels)


def test_a_dead_runs_container_of_the_study_is_removed_before_the_first_trial(
    tmp_path: Path, small_space: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    me = f"{socket.gethostname()}:{os.getpid()}"
    left, live, other = container("k", dead_owner()), container("k", me, "1"), container("x", me)
    remote = container("k", "elsewhere:1", "2")  # another host's run: cannot be seen from here
    docker = Docker([left, live, other, remote])
    monkeypatch.setattr(cleanup, "docker_client", lambda: docker)
    small_space["target"] = {"kind": "docker", "image": "vllm/vllm-openai:v0.17.1"}
    space = write_yaml(tmp_path / "s.yaml", small_space)
    lines: list[str] = []
    opts = RunOptions(space_path=space, trials=1, study="k", results_dir=tmp_path / "results")
    with pytest.raises(TunerError, match="is not on this host"):  # the trial's own start
        run_study(opts, lines.append)
    assert [c.removed for c in (left, live, other, remote)] == [True, False, False, False]
    said = [line for line in lines if "removed container tune-k-0" in line]
    assert said and "is gone" in said[0], lines


def test_a_dead_runs_engine_process_is_stopped(tmp_path: Path) -> None:
    engine = subprocess.Popen(["sleep", "600"], start_new_session=True)
    start = started_at(engine.pid)
    staged = tmp_path / "trials" / ".0003.partial"
    staged.mkdir(parents=True)
    note = {"owner": dead_owner(), "groups": [{"pgid": engine.pid, "start": start}]}
    (staged / NOTE).write_text(json.dumps(note))
    lines: list[str] = []
    clear_leftovers("k", "process", tmp_path / "trials", lines.append)
    assert engine.wait(timeout=30) == -signal.SIGTERM
    assert not (staged / NOTE).exists()
    assert any(f"stopped engine process group {engine.pid}" in line for line in lines)


def test_a_live_runs_engine_and_a_reused_pid_are_left_alone(tmp_path: Path) -> None:
    engine = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        me = f"{socket.gethostname()}:{os.getpid()}"
        notes = {"a": (me, 0), "b": (dead_owner(), 12345)}  # b: another process has the pid now
        for folder, (owner, start) in notes.items():
            (tmp_path / "trials" / folder).mkdir(parents=True)
            group = {"pgid": engine.pid, "start": start}
            (tmp_path / "trials" / folder / NOTE).write_text(
                json.dumps({"owner": owner, "groups": [group]})
            )
        clear_leftovers("k", "process", tmp_path / "trials", lambda _: None)
        time.sleep(0.2)
        assert engine.poll() is None
    finally:
        engine.kill()
        engine.wait()


@pytest.mark.slow  # two tune processes and a local engine: about 15 s
def test_tune_run_killed_mid_trial_leaves_no_engine_process(
    tmp_path: Path, small_space: dict[str, Any]
) -> None:
    port = free_port()
    command = [sys.executable, str(FAULTY_ENGINE), "{model}", "--x-itl-ms", "20"]
    engine = {"name": "llama.cpp", "version": "0.3.36", "model": "m", "port": port,
              "command": command}  # fmt: skip
    space = {**small_space, "engine": engine, "target": {"kind": "process"}, "base": {}}
    space["parameters"], space["rules"] = {}, []
    path = write_yaml(tmp_path / "s.yaml", space)
    args = ("run", "--space", str(path), "--study", "k")
    first = tune(*args, cwd=tmp_path)
    note = wait_for(lambda: list((tmp_path / "results" / "k" / "trials").glob(f"*/{NOTE}")))
    pgid = json.loads(note[0].read_text())["groups"][0]["pgid"]
    wait_listening(port)  # past its start-up, which ends on a log line to the run
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    os.killpg(pgid, 0)  # the engine outlived its run
    code, out = finish(tune(*args, cwd=tmp_path))
    assert code == 0 and f"stopped engine process group {pgid}" in out, out
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
