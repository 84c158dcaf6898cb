"""Errors the user can fix. The CLI prints them as one line and exits with code 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad config, CLI or input: reported as `error: <message>` with exit code 2, no traceback.

    The message names what is wrong (the key path where there is one) and what is allowed.
    """


class ShortOutputError(RuntimeError):
    """A sequence came back with fewer tokens than the point asked for; its timings are meaningless."""


def known_names(name: str, known: list) -> str:
    """` (known: a, b; did you mean 'a'?)`: the tail of an unknown-name message."""
    return f" (known: {', '.join(known)}){did_you_mean(name, known)}"


# How alike a name must be to a known one to be suggested (difflib's ratio): 0.7 keeps batch_size -> batch_sizes
# and ttft -> ttft_ms, and drops colour -> cluster (0.62), which only misleads.
SUGGEST_CUTOFF = 0.7


def did_you_mean(name: str, known: list) -> str:
    """`; did you mean 'a'?` when one of `known` is `name` in another case or spelled close to it; else ""."""
    import difflib

    same_but_case = [k for k in known if k.lower() == name.lower()]
    close = same_but_case or difflib.get_close_matches(name, known, n=1, cutoff=SUGGEST_CUTOFF)
    if not close:  # spelled in another case and with a typo: vLM for vllm
        lowered = difflib.get_close_matches(name.lower(), [k.lower() for k in known], n=1, cutoff=SUGGEST_CUTOFF)
        close = [k for k in known if lowered and k.lower() == lowered[0]]
    return f"; did you mean {close[0]!r}?" if close else ""


def is_oom(e: BaseException) -> bool:
    """Device OOM, or the host allocator failing (PyTorch's CPU allocator raises a RuntimeError)."""
    import torch

    if isinstance(e, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(e, RuntimeError) and "can't allocate memory" in str(e)


# What gloo and NCCL say when a collective's peer is gone (its rank died, perhaps on another node).
LOST_PEER_MARKERS = ("Connection reset by peer", "Connection closed by peer", "NCCL communicator was aborted")


def lost_peer(e: BaseException) -> bool:
    """A collective failed because another rank is gone: the ranks can no longer step together, so the worker
    must end (its launcher then says which rank died how) rather than report the point and go on."""
    return isinstance(e, RuntimeError) and any(marker in str(e) for marker in LOST_PEER_MARKERS)


def one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}"[:500] if text else type(e).__name__
