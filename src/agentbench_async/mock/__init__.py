"""The built-in mock model: an OpenAI/Anthropic-compatible server (``server.py``) whose replies come from each
environment's policies (``Environment.policies()``), with fault injection, rate limits, prompt caching and batch
APIs for the engine's tests and ``agentbench demo``. A consumer of the environment API, never a dependency of it:
nothing below the command line imports this package."""
