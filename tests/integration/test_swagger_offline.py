"""The Swagger UI page at /schema/swagger loads nothing from another host: its scripts and
styles are the api's own (`/schema/swagger/assets/...`, installed by `make up` and `make test`
through infra/swagger_ui.sh), so it renders on a machine without internet access."""

from __future__ import annotations

import re

import httpx
import pytest

pytestmark = pytest.mark.integration


async def test_the_swagger_page_uses_only_the_apis_own_assets(client: httpx.AsyncClient) -> None:
    page = await client.get("/schema/swagger")
    assert page.status_code == 200, page.text
    sources = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    assert sources, page.text
    assert all(s.startswith("/schema/swagger/assets/") for s in sources), sources
    for source in sources:
        asset = await client.get(source)
        assert asset.status_code == 200, source
        assert len(asset.content) > 500  # the asset itself, not an error page
    assert '"openapi":"3.1.0"' in page.text  # the document itself is inline
