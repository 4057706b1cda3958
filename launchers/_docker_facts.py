"""What the vLLM inside an image says of itself, asked in a container without devices.

The program a docker target runs exists only in its image: asking a ``vllm`` on this machine
would check the space against another build, or against nothing. So before the first trial one
container of the image, with the target's mounts and the image's entrypoint where the space
keeps it, but with no GPU or NPU, runs ``PROBE_SCRIPT``: ``vllm --version``, ``vllm serve
--help=all`` and the env-variable list of the program's own Python. The answers are cached per
image id (its digest) and what the container mounts, so a study's later runs ask nothing.

An image that cannot answer without its devices (vllm-ascend imports the NPU runtime at start)
raises ``FactsUnavailable`` with the program's last words: the pre-flight says so, once, and
what it did not check.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

from launchers import _cleanup
from launchers._cleanup import MANAGED, OWNER
from launchers._docker_spec import DockerSettings, container_spec
from launchers._vllm_facts import (
    PROBE_SCRIPT,
    EngineFacts,
    FactsUnavailable,
    cache_file,
    env_script,
    load_cached,
    parse_probe,
    store_cached,
)
from tuner.engine import EngineConfig
from tuner.owner import owner_id

PROBE_TIMEOUT_S = 600.0  # three imports of vLLM in a cold container on busy cores


def image_facts(settings: DockerSettings, prefix: list[str]) -> EngineFacts:
    """The facts of the ``vllm`` program ``prefix`` names (``[.., "vllm"]``) in the image."""
    client = _cleanup.docker_client()
    image = _image(client, settings.image)
    words = program_words(settings, image, prefix)
    spec = probe_spec(settings, words)
    cache = cache_file(_key(image.id, spec))
    if (facts := load_cached(cache)) is not None:
        return facts
    facts = parse_probe(f"{settings.image}: {words[-1]}", _run(client, spec, settings.image))
    store_cached(cache, facts)
    return facts


def program_words(settings: DockerSettings, image: Any, prefix: list[str]) -> list[str]:
    """The words that start the vllm program in the container: with ``entrypoint: image`` the
    image's entrypoint comes first, as in a trial's container."""
    entry = list(image.attrs.get("Config", {}).get("Entrypoint") or [])
    words = [*entry, *prefix] if settings.entrypoint == "image" else list(prefix)
    for i, word in enumerate(words):
        if Path(word).name == "vllm":
            return words[: i + 1]
    raise FactsUnavailable(f"the image runs {' '.join(words)!r}, not the vllm program")


def probe_spec(settings: DockerSettings, words: list[str]) -> dict[str, Any]:
    """A trial's container arguments without devices, running ``PROBE_SCRIPT`` instead."""
    bare = settings.model_copy(update={"gpus": [], "npus": []})
    config = EngineConfig(command=tuple(words), args=(), env={}, model="", port=0)
    spec = container_spec(bare, config)
    script = [*words[:-1], "sh", "-c", PROBE_SCRIPT, "sh", words[-1], env_script()]
    spec.update(
        entrypoint=[script[0]], command=script[1:], name=f"tune-probe-{uuid.uuid4().hex[:8]}"
    )
    spec["labels"] = {MANAGED: "1", OWNER: owner_id()}  # `tune cleanup` finds one a kill left
    return spec


def _image(client: Any, name: str) -> Any:
    from docker.errors import ImageNotFound

    try:
        return client.images.get(name)
    except ImageNotFound:
        # Not fatal here: the run first clears what a killed run left, then its first start
        # says the same.
        raise FactsUnavailable(f"docker image {name!r} is not on this host") from None


def _run(client: Any, spec: dict[str, Any], image: str) -> str:
    from docker.errors import APIError

    container = None
    try:
        container = client.containers.create(**spec)
        container.start()
        code = int(container.wait(timeout=PROBE_TIMEOUT_S)["StatusCode"])
        out = container.logs(stdout=True, stderr=False).decode(errors="replace")
        err = container.logs(stdout=False, stderr=True).decode(errors="replace")
    except (APIError, OSError) as error:  # requests' timeouts are OSErrors too
        raise FactsUnavailable(f"a container of {image} could not answer: {error}") from None
    finally:
        if container is not None:
            container.remove(force=True)
    if code != 0:
        last = (err.strip().splitlines() or out.strip().splitlines() or ["no output"])[-1]
        raise FactsUnavailable(f"without devices, vllm in {image} exited with code {code}: {last}")
    return out


def _key(image_id: str, spec: dict[str, Any]) -> str:
    # The program can come from a mount (a venv bound into a bare image): the mounts count too.
    parts = {k: spec.get(k) for k in ("entrypoint", "volumes", "environment")}
    return image_id + "|" + hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
