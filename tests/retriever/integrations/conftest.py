"""Async tests of LangChain's standard suites run on pytest-asyncio, in this folder only.

The project runs pytest-asyncio in its default strict mode, where only marked
tests run on an event loop; the suites' ``async def`` tests carry no mark.
Each coroutine test collected here gets ``asyncio``'s mark just before
pytest-asyncio looks for it (this wrapper is innermost), so sync tests stay
unmarked and no other folder is touched.
"""

from __future__ import annotations

import inspect

import pytest


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_pycollect_makeitem(collector, name, obj):
    outcome = yield
    made = outcome.get_result()
    for item in made if isinstance(made, list) else [made]:
        if isinstance(item, pytest.Function) and inspect.iscoroutinefunction(item.obj):
            item.add_marker(pytest.mark.asyncio)
