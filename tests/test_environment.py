"""The test environment itself: a real Redis server, and a model layer free of Scrapy."""

from __future__ import annotations

import subprocess
import sys


def test_redis_server_answers(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    client.set("echo:test:key", "value")
    assert client.get("echo:test:key") == b"value"
    client.delete("echo:test:key")
    client.close()


def test_model_layer_imports_no_scrapy_twisted_or_redis() -> None:
    code = (
        "import sys, scrapy_echo.model, scrapy_echo.model.intervals.solver;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('scrapy', 'twisted', 'redis'));"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
