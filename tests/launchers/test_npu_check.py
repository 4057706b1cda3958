"""Before the first launch: the target's NPUs exist and nothing outside tune holds them.

``npu-smi`` is not on this machine: its answer is tests/fixtures/devices/npu_smi_info.txt,
``npu-smi info``'s tables on two NPUs with a process holding NPU 1.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import launchers._gpu_check as gpu_check
import launchers._npu_check as npu_check
from launchers._gpu_check import container_of
from launchers._npu_check import check_npus
from tuner.errors import InfraError, SpaceError

INFO = (Path(__file__).parents[1] / "fixtures" / "devices" / "npu_smi_info.txt").read_text()
CID = "e" * 64


def info(text: str = INFO):
    return lambda: text


def test_free_npus_pass() -> None:
    assert check_npus([0], info=info()) == []
    row = next(line for line in INFO.splitlines() if "30517" in line)
    idle = INFO.replace(row, "| No running processes found in NPU 1 |")
    assert check_npus([0, 1], info=info(idle)) == []


def test_an_npu_this_machine_lacks_is_refused_naming_the_ones_it_has() -> None:
    with pytest.raises(SpaceError, match=r"target\.npus: NPU 2 is not on this machine "
                       r"\(npu-smi lists 0, 1\)"):  # fmt: skip
        check_npus([1, 2], info=info())


def test_a_process_holding_an_npu_is_named_with_what_frees_it() -> None:
    with pytest.raises(InfraError) as err:
        check_npus([0, 1], info=info())
    assert str(err.value) == (
        "target.npus: held outside this study: NPU 1: 57800 MB by pid 30517 (python3, process); "
        "free it with `kill 30517`, or `tune cleanup` if a run of tune left it"
    )


def test_a_container_holding_an_npu_is_named_with_docker_rm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "30517").mkdir()
    (tmp_path / "30517" / "cgroup").write_text(f"0::/system.slice/docker-{CID}.scope\n")

    def here(pid: str) -> str | None:
        return container_of(pid, tmp_path)

    # The check filters on it and the holder's words name it: both read this cgroup.
    monkeypatch.setattr(npu_check, "container_of", here)
    monkeypatch.setattr(gpu_check, "container_of", here)
    with pytest.raises(InfraError, match=r"container eeeeeeeeeeee\); free it with `docker rm -f "):
        check_npus([1], info=info())
    # A container of tune's own runs is the run's to clear or wait for, not a refusal.
    assert check_npus([1], ours=frozenset({CID}), info=info()) == []


@pytest.mark.skipif(shutil.which("npu-smi") is not None, reason="npu-smi is here")
def test_without_npu_smi_the_check_says_what_it_did_not_do() -> None:
    assert check_npus([0]) == [
        "NPUs not checked before the first launch: npu-smi is not on this machine"
    ]
    assert check_npus([]) == []


@pytest.mark.skipif(shutil.which("npu-smi") is None, reason="needs npu-smi")
def test_the_real_tool_lists_npus_that_pass_or_name_their_holder() -> None:
    try:
        check_npus([0])
    except InfraError as err:
        assert "by pid" in str(err)


@pytest.mark.skipif(shutil.which("npu-smi") is not None, reason="npu-smi is here")
def test_a_docker_target_on_npus_has_them_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    import launchers.docker
    from launchers import _cleanup
    from launchers._docker_spec import DockerSettings

    class Client:
        containers = type("Containers", (), {"list": lambda self, **_: []})()

    monkeypatch.setattr(_cleanup, "docker_client", Client)
    settings = DockerSettings(image="vllm-ascend:v0.32.0", npus=[0, 1])
    assert launchers.docker.DockerLauncher.check_devices(settings) == [
        "NPUs not checked before the first launch: npu-smi is not on this machine"
    ]
