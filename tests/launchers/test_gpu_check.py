"""Before the first launch: the target's GPUs exist and nothing outside tune holds them.

``nvidia-smi`` is not on this machine: its answers are given in the CSV form it prints for
``--query-gpu=index,uuid`` and ``--query-compute-apps=gpu_uuid,pid,process_name,used_memory``
with ``--format=csv,noheader``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from launchers._gpu_check import APPS_QUERY, GPU_QUERY, check_gpus, container_of
from tuner.errors import InfraError, SpaceError

GPUS = "0, GPU-aaaa\n1, GPU-bbbb\n2, GPU-cccc\n3, GPU-dddd\n"
CID = "f" * 64


def smi(apps: str):
    answers = {tuple(GPU_QUERY): GPUS, tuple(APPS_QUERY): apps}
    return lambda args: answers[tuple(args)]


def test_free_gpus_pass() -> None:
    assert check_gpus(["0", "1"], smi=smi("GPU-dddd, 4242, python3, 1000 MiB\n")) == []


def test_a_gpu_this_machine_lacks_is_refused_naming_the_ones_it_has() -> None:
    with pytest.raises(SpaceError, match=r"GPU 7 is not on this machine \(nvidia-smi lists 0, 1"):
        check_gpus(["0", "7"], smi=smi(""))
    assert check_gpus(["GPU-bbbb"], smi=smi("")) == []  # a UUID names a GPU too


def test_a_process_holding_a_gpu_is_named_with_what_frees_it() -> None:
    apps = "GPU-bbbb, 4242, /usr/bin/python3, 70123 MiB\n"
    with pytest.raises(InfraError) as err:
        check_gpus(["0", "1"], smi=smi(apps))
    assert "GPU 1: 70123 MiB by pid 4242 (/usr/bin/python3, process)" in str(err.value)
    assert "free it with `kill 4242`" in str(err.value)


def test_a_leftover_container_is_named_with_docker_rm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(f"0::/system.slice/docker-{CID}.scope\n")
    import launchers._gpu_check as gpu_check

    monkeypatch.setattr(gpu_check, "container_of", lambda pid: container_of(pid, tmp_path))
    apps = "GPU-aaaa, 4242, python3, 80000 MiB\n"
    with pytest.raises(InfraError, match=r"container ffffffffffff\); free it with `docker rm -f "):
        check_gpus(["0"], smi=smi(apps))
    # A container of tune's own runs is the run's to clear or wait for, not a refusal.
    assert check_gpus(["0"], ours=frozenset({CID}), smi=smi(apps)) == []


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="nvidia-smi is here")
def test_without_nvidia_smi_the_check_says_what_it_did_not_do() -> None:
    assert check_gpus(["0"]) == [
        "GPUs not checked before the first launch: nvidia-smi is not on this machine"
    ]
    assert check_gpus([]) == []


@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs nvidia-smi")
def test_the_real_tool_lists_gpus_that_pass_or_name_their_holder() -> None:
    try:
        check_gpus(["0"])
    except InfraError as err:
        assert "by pid" in str(err)
