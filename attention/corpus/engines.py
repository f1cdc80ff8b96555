"""Two engines for the corpus job, one computation: both call shards.process_shard per shard.

local  shards one after the other in this process (the model loaded once).
ray    Ray Data: the pending shards as items, split into blocks (override_num_blocks) so
       that every actor gets work, `map_batches(ShardWorker, concurrency=k)`: each actor loads
       the model once and computes and writes whole shards; the driver keeps the manifest.
       `address` joins a running cluster ("ray start --head" ...); without it Ray starts a
       local one (ray.init(num_cpus=workers, include_dashboard=False)).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from attention.corpus.compute import Settings

INSTALL = ('--engine ray needs Ray, which is not installed: pip install -r requirements-scale.txt '
           '(or pip install "ray[data]==2.60.0").')

NO_CLUSTER = ("Ray could not start or join {where} ({error}); check the address, or run with "
              "--engine local.")


def check_ray() -> None:
    from attention.corpus.shards import Refused

    try:
        import ray  # noqa: F401
        import ray.data  # noqa: F401
    except ImportError as err:
        raise Refused(INSTALL) from err


def process_local(model, out: Path, texts: list[str], pending: list[int], settings: Settings,
              finished: Callable[[dict], None]) -> None:
    from attention.corpus.shards import process_shard

    bs = settings.batch_size
    for index in pending:
        finished(process_shard(model, out, index, texts[index * bs:(index + 1) * bs], settings))


class ShardWorker:
    """A Ray Data actor: the model loaded once, then whole shards computed and written."""

    def __init__(self, model_source: str, out: str, settings: dict):
        import torch

        from attention.corpus.shards import load_model_for_job

        torch.set_num_threads(1)
        self.model = load_model_for_job(model_source)
        self.out = Path(out)
        self.settings = Settings.from_dict(settings)

    def __call__(self, batch: dict) -> dict:
        from attention.corpus.shards import process_shard

        shards, counts, tables = [], [], []
        for index, texts in zip(batch["shard"], batch["texts"]):
            result = process_shard(self.model, self.out, int(index), [str(t) for t in texts],
                                   self.settings)
            shards.append(result["shard"])
            counts.append(result["texts"])
            tables.append(",".join(result["tables"]))
        return {"shard": shards, "texts": counts, "tables": tables}


def process_on_ray(model_source: str, out: Path, texts: list[str], pending: list[int],
            settings: Settings, finished: Callable[[dict], None], *, address: str | None = None,
            workers: int = 2) -> None:
    import ray

    if not pending:
        return
    started_here = False
    if not ray.is_initialized():
        from attention.corpus.shards import Refused

        try:
            if address:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        except Exception as err:  # noqa: BLE001 - no cluster at the address, a node that timed out
            raise Refused(NO_CLUSTER.format(where=address or "a local Ray node",
                                            error=type(err).__name__)) from err
        started_here = True
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.verbose_progress = False
        bs = settings.batch_size
        items = [{"shard": i, "texts": texts[i * bs:(i + 1) * bs]} for i in pending]
        ds = ray.data.from_items(items, override_num_blocks=min(len(items), max(workers * 4, 1)))
        ds = ds.map_batches(ShardWorker, batch_size=1, concurrency=workers, num_cpus=1,
                            fn_constructor_kwargs={"model_source": model_source,
                                                   "out": str(Path(out).resolve()),
                                                   "settings": settings.as_dict()})
        for row in ds.iter_rows():
            finished({"shard": int(row["shard"]), "texts": int(row["texts"]),
                      "tables": [t for t in str(row["tables"]).split(",") if t]})
    finally:
        if started_here:
            ray.shutdown()
