"""A training loop for the kill-and-resume test: reads an exfeed.torch.Dataset through
torchdata's StatefulDataLoader (2 worker processes), appends each minibatch's keys to LOG as one
line, and after every CHECKPOINT_EVERY steps writes the loader's state to CKPT (atomically).

    python train_until_killed.py DATA LOG CKPT [resume]
"""

import json
import os
import sys
import time

from torchdata.stateful_dataloader import StatefulDataLoader

import exfeed.torch

CHECKPOINT_EVERY = 4


def main() -> None:
    data, log, ckpt = sys.argv[1:4]
    resume = len(sys.argv) > 4
    ds = exfeed.torch.Dataset(data, inputs={"x": ("dense", 3), "y": ("sparse", 5)}, minibatch_size=8,
                              layout="packed", seed=11, chunk_size=600, window_chunks=2, with_keys=True)
    loader = StatefulDataLoader(ds, batch_size=None, num_workers=2)
    step = 0
    if resume:
        with open(ckpt) as f:
            saved = json.load(f)
        loader.load_state_dict(saved["loader"])
        step = saved["step"]
    with open(log, "a") as out:
        for batch in loader:
            step += 1
            out.write(json.dumps(batch["keys"].tolist()) + "\n")
            out.flush()
            if step % CHECKPOINT_EVERY == 0:
                tmp = ckpt + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({"step": step, "loader": loader.state_dict()}, f)
                os.replace(tmp, ckpt)
            if not resume:
                time.sleep(0.05)  # slow enough to be killed mid-epoch


if __name__ == "__main__":
    main()
