"""``tune sim-serve``: the simulated engine behind an HTTP server, with ``vllm serve`` flags."""

from __future__ import annotations

import os

import typer

from tuner.cli.root import app
from tuner.errors import EngineExited


@app.command(
    "sim-serve",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def sim_serve(
    ctx: typer.Context,
    profile: str = typer.Option("h200x4", "--sim-profile", help="Hardware profile: h200x4, 910c."),
    startup_delay: float = typer.Option(
        0.0, "--sim-startup-delay", help="Seconds before the port opens (a real engine loads)."
    ),
    seed: int = typer.Option(0, "--sim-seed", help="Seed of the run-to-run noise."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to bind (0.0.0.0: every interface of this machine)."
    ),
    version: str | None = typer.Option(
        None,
        "--version",
        help="vLLM release to announce and whose flags to accept (default: the profile's).",
    ),
) -> None:
    """Serve a simulated vLLM engine: [MODEL] plus any `vllm serve` flags; env vars as vLLM.

    It binds loopback unless ``--host`` says otherwise, like ``tune dashboard``, and refuses a
    flag the announced release lacks (exit 2), as that release's argument parser would.
    """
    from launchers.simengine.server import serve  # starlette and uvicorn load only when serving

    args = ["--host", host, *ctx.args]
    code = serve(args, os.environ, profile, seed, startup_delay, version)
    if code:
        raise EngineExited(code)
