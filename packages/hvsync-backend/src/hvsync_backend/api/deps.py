"""Small request helpers shared by routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from hvsync_backend.context import BackendContext


async def get_context(request: Request) -> BackendContext:
    return request.app.state.context


Ctx = Annotated[BackendContext, Depends(get_context)]
