"""Bounds for a shared server: a cache bounded by bytes, and a gate on heavy computations.

A server shared by many sessions must keep its memory whatever they do. Two things bound it:

    ByteLRU(budget)   least-recently-used entries are dropped once the kept values' bytes
                      (tensors, arrays, DataFrames, bytes, walked through containers and
                      dataclasses) pass the budget; one computation per key at a time, the
                      other callers of that key wait for it and share its value.
    Gate(slots)       at most `slots` heavy computations at once (each makes transient
                      (n, n) tensors); a caller that must wait is told how many are ahead.
    return_freed_memory()  glibc keeps freed blocks up to 32 MB in its per-thread heaps
                      (one (n, n) head is 16 MB at n = 2048): a server measured 0.2 GB more
                      after each Score analysis page it drew. Serving blocks from 1 MB up
                      with mmap gives them back to the system when freed.

Pure (threading only, no streamlit): attention/ui/cache.py makes one of each per server.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import sys
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Callable, Hashable, Iterator, TypeVar

import numpy as np
import pandas as pd

T = TypeVar("T")
M_MMAP_THRESHOLD = -3          # mallopt parameters (glibc malloc.h)
M_ARENA_MAX = -8
ARENAS = 2                     # malloc heaps for the whole process (glibc: 8 per core)


def return_freed_memory(threshold: int = 1 << 20, arenas: int = ARENAS) -> bool:
    """Make glibc's malloc serve every block of `threshold` bytes or more with its own mmap,
    returned to the system when freed (and stop it raising that threshold by itself), and
    keep at most `arenas` heaps for the smaller blocks: by default glibc gives threads up to
    8 per core, and each script thread of a busy server (one per session) kept its own heap
    of freed blocks. Measured, both bundled models and 8 sessions running SmolLM2 on 256
    pieces (bench/memory.py --lm): peak RSS 3.01 GB with glibc's default, 2.78 GB with
    this call (made when the first page runs, after some heaps exist), 2.43-2.60 GB with
    MALLOC_ARENA_MAX=2 set before the server starts (the Dockerfile does). Process-wide; True
    where it took effect (glibc), False elsewhere
    (macOS, musl)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, threshold)) \
            and bool(libc.mallopt(M_ARENA_MAX, arenas))
    except (OSError, AttributeError, TypeError):
        return False


def nbytes(value: object, _seen: set[int] | None = None) -> int:
    """Bytes held by a value: tensor storages (once each, a view counts its whole storage),
    arrays, DataFrames, bytes and strings, summed through dicts, sequences and dataclasses."""
    seen = set() if _seen is None else _seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    torch = sys.modules.get("torch")     # no tensor exists before torch is imported
    if torch is not None and isinstance(value, torch.Tensor):
        storage = value.untyped_storage()
        if storage.data_ptr() in seen:
            return 0
        seen.add(storage.data_ptr())
        return storage.nbytes()
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, (pd.DataFrame, pd.Series)):
        return int(np.sum(value.memory_usage(deep=True)))
    if isinstance(value, (bytes, bytearray, str)):
        return len(value)
    if isinstance(value, dict):
        return sum(nbytes(k, seen) + nbytes(v, seen) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(nbytes(v, seen) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(nbytes(v, seen) for v in vars(value).values())
    return 0


class ByteLRU:
    """A thread-safe LRU cache whose values' bytes stay within `budget`.

    A value larger than the whole budget is returned but not kept. `sizeof` measures a value
    (default: nbytes)."""

    def __init__(self, budget: int, sizeof: Callable[[object], int] = nbytes) -> None:
        self.budget = budget
        self._sizeof = sizeof
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._computing: dict[Hashable, threading.Lock] = {}
        self.total = 0                      # bytes of the kept values

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.total = 0

    def keys(self) -> list[Hashable]:
        """The kept keys, least recently used first."""
        with self._lock:
            return list(self._items)

    def _get(self, key: Hashable) -> tuple[bool, object]:
        with self._lock:
            if key not in self._items:
                return False, None
            self._items.move_to_end(key)
            return True, self._items[key][0]

    def put(self, key: Hashable, value: object) -> None:
        size = self._sizeof(value)
        with self._lock:
            if key in self._items:
                self.total -= self._items.pop(key)[1]
            if size > self.budget:
                return
            self._items[key] = (value, size)
            self.total += size
            while self.total > self.budget:
                _, (_, dropped) = self._items.popitem(last=False)
                self.total -= dropped

    def get_or_compute(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The kept value of `key`, or compute() once (callers of the same key meanwhile wait
        for it and get its value; a failed computation is left to the next caller)."""
        found, value = self._get(key)
        if found:
            return value
        with self._lock:
            turn = self._computing.setdefault(key, threading.Lock())
        with turn:
            found, value = self._get(key)
            if found:
                return value
            try:
                value = compute()
                self.put(key, value)
                return value
            finally:
                with self._lock:
                    self._computing.pop(key, None)


class Gate:
    """At most `slots` heavy computations run at once; the others wait their turn."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a gate needs at least one slot, got {slots}")
        self.slots = slots
        self._cond = threading.Condition()
        self.running = 0
        self.waiting = 0
        self._held = threading.local()      # slots this thread holds (a nested call re-enters)

    @contextmanager
    def slot(self, on_wait: Callable[[int], None] | None = None) -> Iterator[None]:
        """Hold one slot for the block. When none is free, on_wait(ahead) is called first
        (outside the gate's lock) with how many other computations run or wait before this one.
        A thread that already holds a slot re-enters it (a heavy step inside another waits for
        nothing, and two such threads cannot deadlock)."""
        depth = getattr(self._held, "depth", 0)
        if depth:
            self._held.depth = depth + 1
            try:
                yield
            finally:
                self._held.depth = depth
            return
        with self._cond:
            free = self.running < self.slots
            if free:
                self.running += 1
            else:
                self.waiting += 1
                ahead = self.running + self.waiting - 1
        if not free:
            try:
                if on_wait is not None:
                    on_wait(ahead)
            except BaseException:
                with self._cond:
                    self.waiting -= 1
                raise
            with self._cond:
                while self.running >= self.slots:
                    self._cond.wait()
                self.waiting -= 1
                self.running += 1
        self._held.depth = 1
        try:
            yield
        finally:
            self._held.depth = 0
            with self._cond:
                self.running -= 1
                self._cond.notify()
