"""What DeepSpeed's ranks share on the CPU and across nodes (deepspeed_tp.py, deepspeed_zero.py):
gathering a value from every rank, DeepSpeed's shared-memory all-reduce, and the process's memory."""

from __future__ import annotations

import os

SHM_DIR = "/dev/shm"


def process_rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def shm_allreduce_active() -> bool:
    """Whether DeepSpeed's shared-memory all-reduce kernel (CPU) was built and loaded, and is used."""
    from deepspeed.comm import comm

    backend = getattr(comm, "cdb", None)
    return getattr(backend, "shm_comm_op", None) is not None and getattr(backend, "shm_vector_kernel_level", 0) > 0


def all_reduce_across_nodes() -> None:
    """AutoTP's all-reduces through the process group (gloo), not DeepSpeed's shared-memory kernel: that kernel only
    works when every rank is on one machine, and DeepSpeed's CPU op (shm_interface.cpp) then leaves its buffers unmade
    but still runs it, which segfaults (its ccl.cpp twin falls back; this one does not). DeepSpeed skips the kernel
    where its vector level is too low for the dtype, so level 0 makes every all-reduce the process group's."""
    import deepspeed
    from deepspeed.comm import comm

    deepspeed.init_distributed()  # what init_inference would do first; the backend it makes is the one to change
    if getattr(comm.cdb, "shm_comm_op", None) is not None:
        comm.cdb.shm_vector_kernel_level = 0


def unlink_shm_allreduce_buffer() -> None:
    """Remove this rank's name for DeepSpeed's shared-memory all-reduce buffer (CPU).

    DeepSpeed creates one 66 MiB /dev/shm segment per rank and never unlinks it, so each CPU run used to
    leave them behind for good: /dev/shm is RAM, and a few hundred runs left the host too little memory
    for the next sweep. Once all ranks have mapped the segments, unlinking only drops the name; the memory
    lives until the last rank exits, however it exits.
    """
    if not shm_allreduce_active():
        return
    import torch.distributed as dist

    # shm.cpp's name: deepspeed_allreduce_buffer_{uid}_{MASTER_ADDR}_{MASTER_PORT}_{rank}
    name = (f"deepspeed_allreduce_buffer_{os.getuid()}_{os.environ.get('MASTER_ADDR', '')}_"
            f"{os.environ.get('MASTER_PORT', '')}_{dist.get_rank() if dist.is_initialized() else 0}")
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except FileNotFoundError:
        pass


def gather_from_ranks(value) -> list:
    """Every rank's `value`, in rank order (a collective: all ranks call it at the same point of `load`)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return [value]
    values = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values
