"""Staged writes: records staged in parts by many writers' tasks, published once
(the exactly-once Spark sink). The rules are in plan.py, the I/O in service.py."""
