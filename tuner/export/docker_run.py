"""The ``docker run`` equivalent of a launch, as the docker launcher would start it.

The command itself is the docker kind's (``Launcher.deploy_command``); what is chosen here is
the target it is for. A study that ran elsewhere (``--launcher sim``) still gets the command
for its space's docker target; a space with no docker target gets one for the engine's usual
image (its GPUs, or its tensor-parallel size of Ascend NPUs).
"""

from __future__ import annotations

from typing import Any

from launchers import DeployCommand, Deployment, launcher_class
from tuner.export.configs import Group, LaunchConfig, flag_groups
from tuner.space.schema import Space

DEFAULT_IMAGES = {
    "vllm": "vllm/vllm-openai:v{version}",
    "vllm-ascend": "quay.io/ascend/vllm-ascend:v{version}",
    "llama.cpp": "ghcr.io/ggml-org/llama.cpp:server",
}


def image_of(space: Space) -> str:
    image = space.target.settings().get("image") if space.target.kind == "docker" else None
    image = image or space.engine.image
    return str(image or DEFAULT_IMAGES[space.engine.name].format(version=space.engine.version))


def docker_target(space: Space) -> dict[str, Any]:
    """The space's docker target, or one for the engine's usual image."""
    if space.target.kind == "docker":
        return dict(space.target.settings())
    target: dict[str, Any] = {"image": image_of(space)}
    if space.engine.name == "vllm-ascend":
        target["npus"] = list(range(_tp(space)))
    return target


def _tp(space: Space) -> int:
    args = space.base.args
    value = args.get("tensor-parallel-size", args.get("--tensor-parallel-size"))
    return int(value) if isinstance(value, int | str) and str(value).isdigit() else 1


def docker_deploy(launch: LaunchConfig, space: Space) -> DeployCommand:
    """The docker kind's command for ``launch`` on the space's docker target."""
    docker = launcher_class("docker")
    settings = docker.settings_model.model_validate(docker_target(space))
    # A study that ran a local command (a venv's vllm, say): the engine's image has its own.
    argv = launch.program if space.target.kind == "docker" else space.engine.argv_prefix(True)
    # A docker target with no devices is a CPU engine; an exported image needs its GPUs.
    deployment = Deployment(
        tuple(argv), dict(launch.env), tuple(launch.secret_env), space.target.kind != "docker"
    )
    command = docker.deploy_command(settings, deployment)
    assert command is not None, "the docker kind deploys with docker run"
    return command


def docker_groups(launch: LaunchConfig, space: Space) -> list[Group]:
    """``docker run`` words, one group per line, for ``launch`` on the space's docker target."""
    return docker_deploy(launch, space).groups + flag_groups(launch.args)
