"""A real ``privrank serve`` process for end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """Start ``python -m app.cli serve`` and wait until ``/readyz`` answers 200."""

    def __init__(self, env: dict[str, str], workers: int = 1, cwd: str | None = None) -> None:
        import httpx2

        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        # Tests drive many respondents from one address: rate limits off unless a test sets them.
        limits = {
            "PRIVRANK_REGISTER_PER_MINUTE": "0",
            "PRIVRANK_AUTH_FAILURES_PER_MINUTE": "0",
            "PRIVRANK_SUGGEST_PER_HOUR": "0",
        }
        full_env = {**os.environ, "PRIVRANK_LOG_LEVEL": "warning", **limits, **env}
        for name in ("PRIVRANK_ADMIN_KEY", "DATABASE_URL"):  # only what the test asks for
            if name not in env:
                full_env.pop(name, None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port), "--workers", str(workers)],
            env=full_env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._reader.join(5)
                raise RuntimeError(f"privrank serve exited:\n{self.output()}")
            try:
                if httpx2.get(self.base + "/readyz", timeout=1).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"privrank serve did not become ready:\n{self.output()}")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.append(line)

    def output(self) -> str:
        return "".join(self._lines)

    def stop(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        return self.output()
