"""A test server's announcement: a file written whole, which nothing printed can pose as."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.loopback import announce, wait_for_announcement

ROOT = Path(__file__).resolve().parents[1]

# A server whose libraries print first: a URL-looking line, and blank lines (a
# tokenizer trainer's progress did that to stdout, and a test took it for the URL).
NOISY_SERVER = """
import sys, time
from pathlib import Path
from tests.loopback import announce
print("http://127.0.0.1:9/v1", flush=True)
print("\\n\\n", flush=True)
time.sleep(0.3)
announce("http://127.0.0.1:4321/v1", Path(sys.argv[1]))
time.sleep(30)
"""


def start(tmp_path: Path, program: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", program, str(tmp_path / "url")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def test_the_announced_url_is_the_servers_whatever_it_printed(tmp_path):
    server = start(tmp_path, NOISY_SERVER)
    try:
        assert wait_for_announcement(server, tmp_path / "url", timeout=60) == (
            "http://127.0.0.1:4321/v1"
        )
    finally:
        server.kill()
        server.wait()
    assert server.stdout is not None
    assert server.stdout.readline() == b"http://127.0.0.1:9/v1\n"  # (what a line reader took)


def test_a_server_that_exits_unannounced_is_none_at_once(tmp_path):
    server = start(tmp_path, "print('http://127.0.0.1:9/v1')")
    assert wait_for_announcement(server, tmp_path / "url", timeout=60) is None
    assert server.returncode == 0


def test_a_silent_server_is_none_after_the_timeout(tmp_path):
    server = start(tmp_path, "import time; time.sleep(30)")
    try:
        assert wait_for_announcement(server, tmp_path / "url", timeout=0.3) is None
    finally:
        server.kill()
        server.wait()


def test_the_announcement_is_whole_and_leaves_no_partial_file(tmp_path):
    announce("http://127.0.0.1:1/v1", tmp_path / "url")
    assert [p.name for p in tmp_path.iterdir()] == ["url"]
    assert (tmp_path / "url").read_text() == "http://127.0.0.1:1/v1"
