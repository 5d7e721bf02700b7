"""One rank of a job that is checkpointed and resumed on another number of ranks, for the
elastic-resume test: torch.distributed (gloo, a file rendezvous) with WORLD ranks, each reading
an exfeed.torch.Dataset through a StatefulDataLoader of WORKERS worker processes.

    python ranks_resumed_elsewhere.py DATA OUT RANK WORLD WORKERS RENDEZVOUS EQUALIZE (save STEPS | resume)

EQUALIZE is off, repeat or spread (the Dataset's equalize and equalize_mode).
save: reads STEPS minibatches, gathers every rank's loader state with all_gather_object (rank 0
writes them to OUT/states.json), and writes the keys it read to OUT/head-RANK.json.
resume: resumes from OUT/states.json on this job's ranks and workers (Dataset.resume_from), reads
the rest of the epoch and writes to OUT/rest-RANK.json its minibatches' keys (a list a
minibatch), len(loader) before and after.
"""

import json
import os
import sys

import torch.distributed as dist
from torchdata.stateful_dataloader import StatefulDataLoader

import exfeed.torch


def main() -> None:
    data, out, rank, world, workers, rendezvous, equalize, mode = sys.argv[1:9]
    rank, world, workers = int(rank), int(world), int(workers)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    try:
        ds = exfeed.torch.Dataset(data, inputs={"x": ("dense", 3), "y": ("sparse", 5)}, minibatch_size=8,
                                  layout="packed", seed=5, chunk_size=300, window_chunks=2, index="full",
                                  equalize=equalize != "off", equalize_mode="repeat" if equalize == "off" else equalize,
                                  with_keys=True)
        if mode == "save":
            loader = StatefulDataLoader(ds, batch_size=None, num_workers=workers)
            it = iter(loader)
            keys = [k for _ in range(int(sys.argv[9])) for k in next(it)["keys"].tolist()]
            gathered = [None] * world
            dist.all_gather_object(gathered, loader.state_dict())
            if rank == 0:
                with open(os.path.join(out, "states.json"), "w") as f:
                    json.dump(gathered, f)
            name = f"head-{rank}.json"
        else:
            with open(os.path.join(out, "states.json")) as f:
                ds.resume_from(json.load(f))
            loader = StatefulDataLoader(ds, batch_size=None, num_workers=workers)
            before = len(loader)
            keys = {"minibatches": [b["keys"].tolist() for b in loader], "len": before, "len_after": len(loader)}
            name = f"rest-{rank}.json"
        with open(os.path.join(out, name), "w") as f:
            json.dump(keys, f)
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
