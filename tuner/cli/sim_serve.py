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
) -> None:
    """Serve a simulated vLLM engine: [MODEL] plus any `vllm serve` flags; env vars as vLLM.

    It binds loopback unless ``--host`` says otherwise, like ``tune dashboard``.
    """
    from launchers.simengine.server import serve  # starlette and uvicorn load only when serving

    code = serve(["--host", host, *ctx.args], os.environ, profile, seed, startup_delay)
    if code:
        raise EngineExited(code)
