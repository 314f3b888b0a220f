"""How many information tasks a reply that dumps every tool result passes (it should be none).

For every information task of every built-in domain (both splits) the golden path is played through the real
MCP tools of an episode session, and the session is closed with the reply = every tool result's text,
concatenated. A task that passes rewards dumping rather than answering. The task's reference answer is graded
in a second session for contrast (it must always pass).

    python scripts/dump_attack.py
"""

from __future__ import annotations

import asyncio
from collections import Counter

import envs
from envs.session import open_session
from envs.tasks import Task, TaskKind


async def _verdict(task: Task, reply_from_dump: bool) -> bool:
    """Play the golden path through MCP and grade either the dump of its results or the reference answer."""
    session = await open_session(task)
    texts = []
    for call in task.golden_path:
        result = await session.call_tool(call.tool, call.args)
        texts += [block.text for block in result.content if block.type == "text"]
    reply = "\n".join(texts) if reply_from_dump else task.reference_answer
    return (await session.close(reply)).passed


async def main() -> None:
    tasks = [t for t in envs.load_tasks() if t.kind == TaskKind.INFORMATION]
    total, dumps, references = Counter[str](), Counter[str](), Counter[str]()
    for task in tasks:
        total[task.domain] += 1
        dumps[task.domain] += await _verdict(task, reply_from_dump=True)
        references[task.domain] += await _verdict(task, reply_from_dump=False)
    for domain in sorted(total):
        print(f"{domain:10s} dump passes {dumps[domain]:3d}/{total[domain]:3d}   "
              f"reference passes {references[domain]:3d}/{total[domain]:3d}")
    print(f"{'all':10s} dump passes {sum(dumps.values()):3d}/{len(tasks):3d}   "
          f"reference passes {sum(references.values()):3d}/{len(tasks):3d}")


if __name__ == "__main__":
    asyncio.run(main())
