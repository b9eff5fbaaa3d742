"""agentbench-async: AgentBench as a high-throughput asyncio evaluation engine."""

__version__ = "0.1.0"
