"""The endpoints page at a SaaS's size: filtered by name, tenant and state, failing ones
first, a hundred to a page (issue 50: a thousand rows on one page, 5 MB at 10,000)."""

from __future__ import annotations

import re
from pathlib import Path

import brook
from tests.served import Served


def _rows(page: str) -> list[str]:
    return re.findall(r'<tr data-endpoint="([^"]+)"', page)


def test_the_endpoints_page_filters_sorts_and_pages(tmp_path: Path) -> None:
    served = Served(tmp_path / "data")
    try:
        with brook.connect(f"http://127.0.0.1:{served.port}") as b:
            for i in range(230):
                b.create_endpoint(
                    f"c{i:03d}",
                    "https://example.com/hook",
                    [f"events.c{i:03d}"],
                    tenant=f"t{i % 3}",
                    enabled=i % 10 != 0,
                )
        status, page = served.request("GET", "/ui/endpoints")
        assert status == 200
        first = _rows(page)
        assert len(first) == 100 and 'data-matched="230"' in page and "page 1 of 3" in page
        # Disabled by hand is not failing: every row by name.
        assert first == sorted(first) and first[0] == "c000"
        status, page = served.request("GET", "/ui/endpoints?page=3")
        assert len(_rows(page)) == 30 and 'rel="next"' not in page
        assert 'href="/ui/endpoints?name=&amp;tenant=&amp;state=all&amp;page=2" rel="prev"' in page
        status, page = served.request("GET", "/ui/endpoints?page=99")
        assert "page 3 of 3" in page  # past the end: the last page
        status, page = served.request("GET", "/ui/endpoints?name=C01")
        assert _rows(page) == [f"c01{d}" for d in range(10)]
        status, page = served.request("GET", "/ui/endpoints?tenant=t1&state=disabled")
        assert _rows(page) == [f"c{i:03d}" for i in range(230) if i % 3 == 1 and i % 10 == 0]
        status, page = served.request("GET", "/ui/endpoints?state=failing")
        assert _rows(page) == [] and "No endpoint matches" in page
        status, page = served.request("GET", "/ui/endpoints?state=sideways")
        assert status == 400
        status, page = served.request("GET", "/ui/endpoints?page=x")
        assert status == 400
    finally:
        served.close()
