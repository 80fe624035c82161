"""``python -m llm_envs.sandbox.service``: serve the sandbox with SandboxFusion's API."""

from llm_envs.sandbox.service.server import main

raise SystemExit(main())
