"""Shared fixtures: real redis-servers on free ports."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests draw the same examples on every run, so CI cannot pass or fail by chance.
# HYPOTHESIS_PROFILE=explore draws thousands of fresh ones, to look for bugs before a change lands.
settings.register_profile(
    "repeatable", max_examples=80, deadline=None, derandomize=True, database=None
)
settings.register_profile(
    "explore",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _redis_binary() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        message = "redis-server is not installed (apt-get install redis-server)"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI must not pass by skipping the Redis tests
        pytest.skip(message)
    return binary


class RedisServer:
    """A throw-away redis-server on a free port: persistence off, or with ``appendonly`` an
    append-only file (fsync every write) that a :meth:`restart` reloads."""

    def __init__(self, workdir: Path, *, appendonly: bool = False) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.appendonly = appendonly
        self._start()

    def _start(self) -> None:
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.appendonly else [
            "--appendonly", "no"]  # fmt: skip
        self.proc = subprocess.Popen(
            [_redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", *aof, "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        import redis

        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if time.monotonic() > deadline or self.proc.poll() is not None:
                        self.stop()
                        raise RuntimeError(f"redis-server did not start on {self.port}") from None
                    time.sleep(0.05)
        finally:
            client.close()

    def pause(self) -> None:
        """Freeze the server: connections stay open, nothing answers (a network outage)."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def restart(self) -> None:
        """Stop the server and start it again on the same port and files."""
        self.stop()
        self._start()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a redis-server shared by the whole session (tests use their own key prefix)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server.url
    server.stop()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of the test's own, which it may pause."""
    server = RedisServer(tmp_path)
    yield server
    server.stop()
