"""One secret policy: key-like env names, credential flags and token-shaped values never reach
a file tune writes (trial folders, tables, exports, the study's own record) or a printed line."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.engine import EngineConfig
from tuner.export import export_study
from tuner.record.study import StudyRecord
from tuner.run.context import RunOptions, prepare
from tuner.run.join import WorkerOptions, _context
from tuner.run.study import opening_line, run_study
from tuner.secret_policy import is_secret_env, is_secret_flag, looks_like_token
from tuner.space.render import render_engine_config
from tuner.storage.urls import open_storage

SECRETS = {
    "OPENAI_KEY": "openai-value-0001",
    "MY_APIKEY": "apikey-value-0002",
    "DB_PASSWD": "passwd-value-0003",
}
FLAG_SECRET = "sslpw-value-0004"
SHAPED = "hf_" + "a1B2c3D4e5" * 3  # a hub token under a harmless name


def secret_space() -> dict[str, Any]:
    data = copy.deepcopy(SMALL_SPACE)
    data["base"]["env"] = {**SECRETS, "HARMLESS_SETTING": SHAPED, "OMP_NUM_THREADS": "1"}
    data["base"]["args"]["ssl-keyfile-password"] = FLAG_SECRET
    return data


VALUES = [*SECRETS.values(), FLAG_SECRET, SHAPED]


def leaks(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}: {v}" for v in VALUES if v.encode() in data]
    return found


KEY_LIKE = ["OPENAI_KEY", "MY_APIKEY", "DB_PASSWD", "HF_TOKEN", "X_AUTH", "DB_PASS",
            "AWS_SECRET_ACCESS_KEY", "GOOGLE_CREDENTIALS"]  # fmt: skip


@pytest.mark.parametrize("name", KEY_LIKE)
def test_key_like_env_names_are_secret(name: str) -> None:
    assert is_secret_env(name, "x")


@pytest.mark.parametrize("name", ["OMP_NUM_THREADS", "VLLM_USE_DEEP_GEMM", "HCCL_BUFFSIZE"])
def test_plain_env_names_are_not(name: str) -> None:
    assert not is_secret_env(name, "1")


@pytest.mark.parametrize("flag", ["--api-key", "--hf-token", "--ssl-keyfile-password",
                                  "--db-password-file", "--ssl-key", "--token"])  # fmt: skip
def test_credential_flags_are_secret(flag: str) -> None:
    assert is_secret_flag(flag)


@pytest.mark.parametrize("flag", ["--max-num-batched-tokens", "--long-prefill-token-threshold",
                                  "--ssl-keyfile", "--max-num-seqs"])  # fmt: skip
def test_tuned_flags_are_not(flag: str) -> None:
    assert not is_secret_flag(flag)


@pytest.mark.parametrize(
    "value", [SHAPED, "sk-" + "x" * 24, "ghp_" + "y" * 30, "Bearer " + "z" * 20]
)
def test_token_shaped_values(value: str) -> None:
    assert looks_like_token(value)


def test_one_flag_list_for_launch_and_export() -> None:
    config = EngineConfig(
        command=("vllm", "serve", "m"),
        args=("--ssl-keyfile-password", FLAG_SECRET, "--max-num-seqs", "4"),
        env={},
        model="m",
        port=8000,
    )
    assert FLAG_SECRET not in config.shell_command()
    assert FLAG_SECRET in config.secret_values()


def test_no_secret_reaches_any_file_of_a_study(tmp_path: Path) -> None:
    space = write_yaml(tmp_path / "secret.yaml", secret_space())
    results = tmp_path / "results"
    run_study(
        RunOptions(space_path=space, results_dir=results, trials=2, confirm=0), lambda _: None
    )
    export_study("secret", None, None, results)
    root = results / "secret"
    assert {p.name for p in root.iterdir()} >= {"commands.md", "recipe.yaml", "report.html"}
    assert (root / "trials" / "0000" / "engine.log").exists()
    assert leaks(root) == []


def stored_record(results: Path, name: str = "secret") -> StudyRecord:
    url = f"sqlite:///{results / name / 'study.db'}"
    record = StudyRecord.read(optuna.load_study(study_name=name, storage=url))
    assert record is not None
    return record


def test_stored_space_names_its_secrets_and_launches_from_the_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    space = write_yaml(tmp_path / "secret.yaml", secret_space())
    results = tmp_path / "results"
    run_study(
        RunOptions(space_path=space, results_dir=results, trials=1, confirm=0), lambda _: None
    )
    record = stored_record(results)
    assert record.space_yaml is not None and not any(v in record.space_yaml for v in VALUES)
    # A worker on a node without the space file: secrets come from its own environment.
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value + "-node")
    monkeypatch.setenv("SSL_KEYFILE_PASSWORD", FLAG_SECRET + "-node")
    space.unlink()
    url = f"sqlite:///{results / 'secret' / 'study.db'}"
    opts = WorkerOptions(study="secret", storage=url, results_dir=results)
    ctx = _context(opts, open_storage(url))
    config = render_engine_config(ctx.space, {})
    for name, value in SECRETS.items():
        assert config.env[name] == value + "-node"
    assert FLAG_SECRET + "-node" in config.args
    assert set(SECRETS) <= config.secret_env


def test_worker_with_the_original_file_joins_the_same_study(tmp_path: Path) -> None:
    space = write_yaml(tmp_path / "secret.yaml", secret_space())
    results = tmp_path / "results"
    run_study(
        RunOptions(space_path=space, results_dir=results, trials=1, confirm=0), lambda _: None
    )
    url = f"sqlite:///{results / 'secret' / 'study.db'}"
    ctx = _context(WorkerOptions(study="secret", storage=url, results_dir=results),
                   open_storage(url))  # fmt: skip
    assert ctx.space_path == space  # the local file, real secrets and relative paths intact
    assert render_engine_config(ctx.space, {}).env["OPENAI_KEY"] == SECRETS["OPENAI_KEY"]


def test_export_names_secrets_as_env_references(tmp_path: Path) -> None:
    space = write_yaml(tmp_path / "secret.yaml", secret_space())
    results = tmp_path / "results"
    run_study(
        RunOptions(space_path=space, results_dir=results, trials=2, confirm=0), lambda _: None
    )
    export_study("secret", None, None, results)
    commands = (results / "secret" / "commands.md").read_text()
    assert '"${SSL_KEYFILE_PASSWORD}"' in commands
    for name in SECRETS:
        assert name in commands
    recipe = yaml.safe_load((results / "secret" / "recipe.yaml").read_text())
    assert "<redacted>" not in yaml.safe_dump(recipe)


def test_opening_line_hides_the_storage_password(tmp_path: Path) -> None:
    space = write_yaml(tmp_path / "small.yaml", copy.deepcopy(SMALL_SPACE))
    ctx = prepare(RunOptions(space_path=space, results_dir=tmp_path / "r",
                             storage="postgresql://user:hunter2pw@db:5432/tune"))  # fmt: skip
    line = opening_line(ctx, 0)
    assert "hunter2pw" not in line and "postgresql://user:***@db:5432/tune" in line
