"""Without openenv-core the server serves every route but ``/openenv``, which names the fix.

openenv-core goes in with ``--no-deps`` (docs/serve.md), so ``pip install
"llm-envs[serve]"`` alone lacks it; the server must still start.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_the_server_starts_without_openenv_and_names_the_missing_package():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["openenv"] = None  # as if openenv-core were not installed
        import httpx
        from llm_envs.serve.app import ServeSettings, serving
        from llm_envs.serve.families import Defaults

        settings = ServeSettings(defaults=Defaults("debate", {"num_agents": 3}, "arithmetic"))
        with serving(settings) as url:
            print(httpx.get(f"{url}/health").status_code)
            print(httpx.post(f"{url}/episodes", json={"problem": 0}).status_code)
            missing = httpx.post(f"{url}/openenv/reset", json={})
            print(missing.status_code)
            print(missing.json()["detail"])
        """
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    health, created, status, detail = ran.stdout.splitlines()
    assert (health, created, status) == ("200", "201", "501")
    assert detail.startswith("the OpenEnv view is not available: ")
    assert "pip install --no-deps openenv-core==0.3.0" in detail
