"""Staging beside what deletes staged folders: a client's timing alone never gets a
storage error (an outside fuzzer's `PUT .../staged/...` answered 503 `storage_error:
writing staging/0/0/0/0/00000000 failed: ENOENT` while the same writer published, or
its topic was deleted, as the chunk was written)."""

from __future__ import annotations

import threading
from pathlib import Path

import brook
from brook.errors import TopicNotFound
from brook.records import Record

ROUNDS = 150


def test_staging_races_publishes_and_deletions_without_a_storage_error(tmp_path: Path) -> None:
    with brook.open(str(tmp_path)) as b:
        failures: list[BaseException] = []
        answers: list[object] = []
        stop = threading.Event()

        def stager() -> None:
            try:
                for seq in range(ROUNDS):
                    t = b.topic("0")
                    for chunk in range(3):
                        try:
                            answers.append(t.stage("w", seq, "p", chunk, [Record(b"")]))
                        except TopicNotFound:  # deleted as it was staged: said so
                            answers.append("gone")
            except BaseException as exc:
                failures.append(exc)
            finally:
                stop.set()

        def publisher() -> None:
            seq = 0
            while not stop.wait(0.001):  # (a tight loop would starve the stager of the lock)
                try:
                    b.topic("0").publish("w", seq, {})
                    b.topic("0").drop_staged("w", seq + 1)
                except TopicNotFound:
                    pass
                except BaseException as exc:
                    failures.append(exc)
                    return
                seq = (seq + 1) % ROUNDS

        def deleter() -> None:
            while not stop.wait(0.005):
                try:
                    b.delete_topic("0")
                except TopicNotFound:
                    pass
                except BaseException as exc:
                    failures.append(exc)
                    return

        threads = [threading.Thread(target=f) for f in (stager, publisher, deleter)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not failures, failures
        assert len(answers) == ROUNDS * 3
