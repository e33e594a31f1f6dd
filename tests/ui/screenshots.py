"""Screenshots of every dashboard page at 1280x800, for docs/ui/ and the README:
`make screenshots` (or `python -m tests.ui.screenshots docs/ui`). A real `brook serve`
with a little of everything: topics, a stream group behind, a queue group with dead
records, endpoints (one healthy, one refusing some records), timers."""

from __future__ import annotations

import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import brook
from tests.delivery.receivers import Answer, Got, Receiver, wait_for
from tests.served import Served
from tests.ui.browser import chromium, watched

PAGES = {
    "overview": "/ui",
    "topic": "/ui/topics/orders?partition=0",
    "groups": "/ui/groups",
    "queues": "/ui/queues",
    "queue": "/ui/queues/payments/charger",
    "endpoints": "/ui/endpoints",
    "endpoint": "/ui/endpoints/billing",
    "timers": "/ui/timers",
    "storage": "/ui/storage",
    "workers": "/ui/workers",
}


def fill(base: str, receiver: Receiver) -> None:
    urllib.request.urlopen(base + "/ui").read()  # starts the sampling of append rates
    with brook.connect(base) as b:
        b.create_topic("orders", partitions=3)
        for batch in range(5):
            b.topic("orders").append_many(
                [
                    brook.Record(
                        b'{"order": %d, "total_cents": %d}' % (batch * 100 + i, 1999 + i),
                        key=b"customer-%d" % (i % 13),
                        headers={"content-type": b"application/json"},
                    )
                    for i in range(100)
                ]
            )
            time.sleep(3.5)
        reader = b.consumer("orders", "analytics")
        reader.poll(max_records=300, timeout=1)
        reader.commit()
        b.topic("payments").append_many([brook.Record(b"payment %d" % i) for i in range(60)])
        queue = b.queue("payments", "charger", max_attempts=1)
        jobs = queue.lease(60, timeout=1)
        queue.ack(jobs[:40])
        queue.nack(jobs[40:52], reason="card declined: insufficient funds")
        queue.nack(jobs[52:], reason="timeout talking to the payment provider")
        b.create_endpoint("billing", receiver.url, ["orders"], start="earliest")
        b.create_endpoint("crm", receiver.url + "crm", ["payments"], start="earliest")
        wait_for(lambda: b.endpoint("billing").stats().acked == 500)
        now = int(time.time() * 1000)
        for day in range(1, 4):
            for i in range(day * 7):
                b.schedule("reminders", b"remind %d" % i, at=now + day * 86_400_000 + i)


def main(folder: str) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)

    def answer(got: Got) -> Answer:
        return Answer(503 if got.path.endswith("crm") else 200)

    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "brook.toml"
        config.write_text("delivery_allow_private_networks = true\n")
        server = Served(Path(scratch) / "data", config=config)
        try:
            base = f"http://127.0.0.1:{server.port}"
            with Receiver(answer) as receiver:
                fill(base, receiver)
                with chromium() as browser:
                    seen = watched(browser, 1280, 800)
                    for name, path in PAGES.items():
                        seen.page.goto(base + path)
                        seen.page.wait_for_load_state("networkidle")
                        seen.page.screenshot(path=str(out / f"{name}.png"))
                        print(f"{out / name}.png")
                    assert not seen.errors, seen.errors
        finally:
            server.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/ui")
