"""A local OpenAI-compatible server for the default model or a policy directory.

:func:`start_server` runs ``transformers serve`` (transformers' own FastAPI server: chat and text
completions, continuous batching; ``pip install "genmem[serve]"``) as a child process on the
loopback interface, waits until it answers ``/health`` and returns a :class:`RunningServer`
whose :attr:`RunningServer.spec` is the ``vllm:<url>#<model>`` spec every other command takes.

The server answers chat completions but ignores ``tools``/``tool_choice`` and ``response_format``
(it says so in its log): roles that bind tools or ask for a JSON schema get plain text back.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import BaseModel, ConfigDict, Field

from genmem.errors import InvalidModelSpec, ModelUnavailable
from genmem.policies.backends import DEFAULT_MODEL_SPEC

__all__ = ["RunningServer", "ServeConfig", "policy_directory", "server_command", "start_server"]

_SERVE_HINT = 'pip install "genmem[serve]" (transformers[serving]: FastAPI and Uvicorn)'


class ServeConfig(BaseModel):
    """What to serve, where, and how (the first six fields are ``genmem serve``'s flags)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(
        default=DEFAULT_MODEL_SPEC,
        description="local (the embedded default), local:DIR or DIR (a model or policy folder).",
    )
    host: str = Field(
        default="127.0.0.1",
        description="Interface.",
    )
    port: int = Field(default=8000, ge=1, description="Port.")
    continuous_batching: bool = Field(
        default=True,
        description="Batch concurrent requests token by token (paged attention; works on CPU "
        "too); without it the server answers one request at a time.",
    )
    device: str = Field(default="cpu", description="Torch device: cpu, cuda, cuda:0, auto.")
    dtype: str = Field(default="float32", description="Weight dtype: float32, bfloat16, auto.")
    kv_memory: float | None = Field(
        default=None,
        description="Share of memory the batching KV cache may take. None: 0.03 on CPU (about "
        "10k tokens of the default model on a 24 GB machine; transformers' own default there "
        "took 10-13 GB), the server's default on a GPU.",
    )
    startup_timeout: float = Field(
        default=180.0, description="Seconds to wait for /health before giving up."
    )
    threads: int | None = Field(
        default=None,
        description="Torch threads of the server (OMP_NUM_THREADS); None leaves the default.",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment for the server process."
    )


def policy_directory(spec: str) -> Path:
    """The model folder a ``--model`` spec names (an embedded model is converted once)."""
    from genmem.policies.local import model_directory

    path = model_directory(spec)
    if not (path / "config.json").is_file():
        raise InvalidModelSpec(
            f"--model {spec!r}: serve 'local' (the embedded model), an embedded model by name "
            "('local:gemma3-270m') or a model folder ('local:DIR' or DIR, with a config.json)",
            spec=spec,
        )
    return path.resolve()


def server_command(config: ServeConfig, directory: Path) -> list[str]:
    """The ``transformers serve`` command line for ``directory``."""
    cmd = [
        sys.executable, "-m", "transformers.cli.transformers", "serve", str(directory),
        "--host", config.host, "--port", str(config.port),
        "--device", config.device, "--dtype", config.dtype,
    ]  # fmt: skip
    if not config.continuous_batching:
        return [*cmd, "--no-continuous-batching"]
    share = config.kv_memory
    if share is None and config.device == "cpu":
        share = 0.03
    memory = ["--cb-max-memory-percent", str(share)] if share is not None else []
    return [*cmd, "--continuous-batching", *memory]


@dataclass
class RunningServer:
    """A started server: its spec, URL and process (stop it with :meth:`stop` or ``with``)."""

    process: subprocess.Popen[bytes]
    base_url: str
    model: str
    log: Path
    _cache: Path

    @property
    def spec(self) -> str:
        """The model spec other commands take (``--model``)."""
        return f"vllm:{self.base_url}#{self.model}"

    def stop(self, timeout: float = 20.0) -> None:
        """Terminate the server (kill it if it does not exit within ``timeout``)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self._cache, ignore_errors=True)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _check_port(host: str, port: int) -> None:
    """ModelUnavailable when ``host:port`` cannot be bound (another server holds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ModelUnavailable(
                f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port"
            ) from None


def _check_installed() -> None:
    import importlib.util

    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise ModelUnavailable(f"serving needs {', '.join(missing)}: {_SERVE_HINT}")


def start_server(config: ServeConfig, log: Path | None = None) -> RunningServer:
    """Start the server and wait until it answers (ModelUnavailable with its log tail if not)."""
    _check_installed()
    # a busy port fails at once, before a first use spends seconds converting the default model
    _check_port(config.host, config.port)
    directory = policy_directory(config.model)
    # The server lists models by scanning the hub cache, which must exist; an empty private one
    # keeps it from reading (or writing) the user's. Nothing is downloaded: the model is a folder.
    cache = Path(tempfile.mkdtemp(prefix="genmem-serve-"))
    env = os.environ | {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"} | config.env
    if config.threads is not None:
        env["OMP_NUM_THREADS"] = str(config.threads)
    log = log or cache / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            server_command(config, directory), stdout=sink, stderr=subprocess.STDOUT, env=env
        )
    server = RunningServer(
        process, f"http://{config.host}:{config.port}/v1", str(directory), log, cache
    )
    deadline = time.monotonic() + config.startup_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = _tail(log)
            server.stop()
            raise ModelUnavailable(f"the server exited (code {process.returncode}): {tail}")
        try:
            if httpx.get(f"http://{config.host}:{config.port}/health", timeout=2).is_success:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.stop()
    raise ModelUnavailable(
        f"the server did not answer within {config.startup_timeout:.0f} s: {_tail(log)}"
    )


def _tail(log: Path, lines: int = 3) -> str:
    """The last lines of the server's log, on one line."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"
