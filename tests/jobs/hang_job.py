"""A torchrun job (gloo, CPU) that hangs on purpose, for tests/test_hangs.py.

    torchrun --nproc-per-node 3 hang_job.py {skip,mismatch} OUT_DIR

Every rank runs three all_reduces and a broadcast in a process group "dp", then:
  skip      rank 1 does not call the next all_reduce (the others wait in it until their timeout)
  mismatch  rank 1 calls all_gather where the others call all_reduce
Each rank then writes its Flight Recorder record as PyTorch dumps it on a timeout: OUT_DIR/rank_<N>
(pickle) and OUT_DIR/json/rank_<N>.json. Run with TORCH_FR_BUFFER_SIZE set (it turns the recorder on).
"""

import datetime
import os
import sys
import time

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=3)

mode, out = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()
group = dist.new_group(list(range(world)), group_desc="dp", timeout=TIMEOUT)
t = torch.ones(1000)
for _ in range(3):
    dist.all_reduce(t, group=group)
dist.broadcast(t, 0, group=group)
try:
    if mode == "skip":
        if rank == 1:
            time.sleep(TIMEOUT.total_seconds() + 3)  # stays alive until the others have timed out
        else:
            dist.all_reduce(t, group=group)
    elif rank == 1:
        dist.all_gather([torch.zeros(1000) for _ in range(world)], t, group=group)
    else:
        dist.all_reduce(t, group=group)
except RuntimeError as exc:  # gloo's timeout: the hang this job is about
    print(f"rank {rank}: {str(exc)[:120]}", flush=True)
os.makedirs(f"{out}/json", exist_ok=True)
with open(f"{out}/rank_{rank}", "wb") as f:
    f.write(c10d._dump_fr_trace())
with open(f"{out}/json/rank_{rank}.json", "wb") as f:
    f.write(c10d._dump_fr_trace_json())
time.sleep(3)  # no rank leaves before every rank has dumped (a departure breaks the others' sockets)
os._exit(0)
