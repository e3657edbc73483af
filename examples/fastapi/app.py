"""A FastAPI back end that publishes articles and fingerprints them in the same async
transaction: ``uvicorn app:app`` (``DATABASE_URL``, default
``postgresql+psycopg://postgres@127.0.0.1:5432/test``).

``POST /articles`` inserts the article and adds its fingerprint through an
:class:`~dedup_store.AsyncDedupStore` on the request's ``AsyncConnection``: a duplicate is
refused with 409 and the transaction rolled back, so neither the article nor its fingerprint
stays. ``POST /check`` says whether a text would be a duplicate.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from dedup_store import AsyncDedupStore, Status

URL = os.environ.get("DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
SCHEMA = os.environ.get("DEDUP_SCHEMA", "articles_dedup")
engine = create_async_engine(URL)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with engine.begin() as conn:
        await conn.execute(
            text("CREATE TABLE IF NOT EXISTS articles (slug text PRIMARY KEY, body text NOT NULL)")
        )
        await AsyncDedupStore(conn, schema=SCHEMA).open()  # creates the store once
    yield
    await engine.dispose()


app = FastAPI(lifespan=lifespan)


async def transaction() -> AsyncIterator[AsyncConnection]:
    """The request's connection, in a transaction committed when the request succeeds."""
    async with engine.begin() as conn:
        yield conn


Connection = Annotated[AsyncConnection, Depends(transaction)]


class Article(BaseModel):
    slug: str
    body: str


@app.post("/articles", status_code=201)
async def publish(article: Article, conn: Connection) -> dict[str, Any]:
    await conn.execute(
        text("INSERT INTO articles (slug, body) VALUES (:slug, :body)"), article.model_dump()
    )
    store = await AsyncDedupStore(conn, schema=SCHEMA).open()
    added = await store.add(article.slug, article.body)
    if added.status is Status.EXACT_DUPLICATE or added.status is Status.NEAR_DUPLICATE:
        # the exception rolls the transaction back: the article and its fingerprint
        raise HTTPException(409, f"duplicate of {added.matches[0].external_id}")
    return {"slug": article.slug, "status": added.status.value, "cluster": added.cluster_id}


@app.post("/check")
async def check(article: Article, conn: Connection) -> dict[str, Any]:
    store = await AsyncDedupStore(conn, schema=SCHEMA).open()
    found = await store.check(article.body)
    return {"status": found.status.value, "matches": [m.external_id for m in found.matches]}
