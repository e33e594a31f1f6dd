"""The process the crash test kills: appends from several threads and reports every ack.

Usage: python producer.py DATA_DIR RUN SEED THREADS

Each ack is reported on stdout as "A run thread seq partition offset" only after
the append returned, so the parent knows exactly what was acknowledged. A
consumer thread reports what it read as "R partition offset crc", and once its
group's commit returned, "C partition position". Values are
derived from (run, thread, seq) so the parent can check the bytes.
"""

from __future__ import annotations

import os
import random
import sys
import threading

import crc32c

import brook
from brook.records import Record

TOPIC = "crash"
PARTITIONS = 3


def value_for(run: int, thread: int, seq: int) -> bytes:
    rng = random.Random(f"{run}:{thread}:{seq}")
    return f"{run}:{thread}:{seq}:".encode() + rng.randbytes(rng.randrange(0, 3000))


def key_for(run: int, thread: int, seq: int) -> bytes:
    return f"key-{(run * 7 + thread * 13 + seq) % 11}".encode()


_out = threading.Lock()


def report(line: str) -> None:
    with _out:
        os.write(1, (line + "\n").encode())


def produce(b: brook.Broker, run: int, thread: int, seed: int) -> None:
    rng = random.Random(seed * 1000 + thread)
    topic = b.topic(TOPIC)
    seq = 0
    while True:
        if rng.random() < 0.5:
            ack = topic.append(value_for(run, thread, seq), key=key_for(run, thread, seq))
            report(f"A {run} {thread} {seq} {ack.partition} {ack.offset}")
            seq += 1
        else:
            count = rng.randrange(1, 60)
            seqs = range(seq, seq + count)
            records = [Record(value_for(run, thread, s), key=key_for(run, thread, s)) for s in seqs]
            acks = topic.append_many(records)
            report(
                "\n".join(
                    f"A {run} {thread} {s} {a.partition} {a.offset}"
                    for s, a in zip(seqs, acks, strict=True)
                )
            )
            seq += count


def consume(b: brook.Broker) -> None:
    consumer = b.consumer(TOPIC, "crash-readers")
    while True:
        records = consumer.poll(max_records=200, timeout=0.2)
        if records:
            report(
                "\n".join(f"R {r.partition} {r.offset} {crc32c.crc32c(r.value)}" for r in records)
            )
            consumer.commit()
            ends = {r.partition: r.offset + 1 for r in records}
            report("\n".join(f"C {p} {position}" for p, position in ends.items()))


def main() -> None:
    data, run, seed, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    b = brook.open(data, segment_bytes_max=256 * 1024)
    b.create_topic(TOPIC, partitions=PARTITIONS)
    workers = [
        threading.Thread(target=produce, args=(b, run, t, seed), daemon=True)
        for t in range(threads)
    ]
    workers.append(threading.Thread(target=consume, args=(b,), daemon=True))
    report("READY")
    for worker in workers:
        worker.start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
