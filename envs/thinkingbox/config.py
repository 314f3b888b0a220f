"""Settings of the ThinkingBox-Bench adapter: where the data and the servers' interpreter are, time limits,
and the OpenAI-compatible endpoints of the user simulator and the rubric judge."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from envs.chat_endpoint import ChatEndpointConfig

RELEASE_TEST_LIST = "releases/thinkingbox_bench_v1/testlist_thinkingbox_bench_v1.yaml"


class ThinkingBoxConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    data: Path = Field(description="local clone of microsoft/thinkingbox-data (never committed here)")
    python: str = Field(description="Python 3.12 interpreter of the servers' venv (fastmcp<4 and "
                                    "tb_business_ops_servers_202606 installed editable)")
    test_list: str = Field(default=RELEASE_TEST_LIST, description="test list, relative to `data` or absolute")
    drop_policy_sources: bool = Field(default=True, description="no Typesense here: drop `sources` from the "
                                                                "server config (disables policy search only)")
    start_timeout_s: float = Field(default=60.0, description="seconds for a server's start: the process, the MCP "
                                   "handshake and the tool listing")
    call_timeout_s: float = Field(default=60.0, description="seconds for one tool call, init or effects")
    max_concurrent_starts: int = Field(default=4, ge=1, description="server processes starting at once (a "
                                                                    "start is CPU-heavy, envs/README.md says how "
                                                                    "much; episodes may be many)")
    user: ChatEndpointConfig | None = Field(default=None, description="user simulator endpoint")
    user_temperature: float = 0.3
    judge: ChatEndpointConfig | None = Field(default=None, description="yes/no rubric judge; None = unjudged")

    def test_list_path(self) -> Path:
        path = Path(self.test_list)
        return path if path.is_absolute() else self.data / path
