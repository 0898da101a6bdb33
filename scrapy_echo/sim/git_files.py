"""Reading the files of a git repository (a clone, bare or not) for the trace importers: one
``git cat-file --batch`` process for all of them."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import TracebackType


def git(repo: Path, *args: str) -> str:
    """``git args`` in ``repo``, its output; ``ValueError`` naming the command if it fails."""
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise ValueError(f"git {' '.join(args[:2])} in {repo}: {done.stderr.strip()[:200]}")
    return done.stdout


class GitFiles:
    """``with GitFiles(repo) as files: files.read("HEAD:path")``: a blob's bytes by any name
    git gives it (``<commit>:<path>``, a blob id), or ``None`` if the repository lacks it (a
    copy may leave its largest files out)."""

    def __init__(self, repo: Path) -> None:
        self._process = subprocess.Popen(
            ["git", "-C", str(repo), "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def read(self, name: str) -> bytes | None:
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(f"{name}\n".encode())
        stdin.flush()
        head = stdout.readline().split()
        if len(head) < 3:  # "<name> missing"
            return None
        size = int(head[2])
        return stdout.read(size + 1)[:size]  # (and the newline after it)

    def __enter__(self) -> GitFiles:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for pipe in (self._process.stdin, self._process.stdout):
            if pipe is not None:
                pipe.close()
        self._process.wait()


__all__ = ["GitFiles", "git"]
