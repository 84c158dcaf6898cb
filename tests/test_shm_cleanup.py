"""tests/contract.py's /dev/shm clean-up after a test kills an engine: only what the killed engine held and nobody
holds now is removed, never a segment of an engine beside it (make test runs two engine tests at a time)."""

import mmap
import os
import uuid

from tests.contract import SHM, remove_orphaned_shm, shm_held


def segment(tag: str) -> str:
    name = f"bench-test-{tag}-{uuid.uuid4().hex}"
    with open(os.path.join(SHM, name), "wb") as f:
        f.write(b"\0" * 4096)
    return name


def test_only_the_killed_engines_own_orphans_are_removed():
    orphan, beside, mapped = segment("orphan"), segment("beside"), segment("mapped")
    with open(os.path.join(SHM, mapped), "r+b") as f, mmap.mmap(f.fileno(), 4096):
        assert mapped in shm_held([str(os.getpid())])
        removed = remove_orphaned_shm({orphan, mapped, "bench-test-gone"})
        assert removed == [orphan]  # the mapped one is in use; the one it never held is not its to remove
    assert not os.path.exists(os.path.join(SHM, orphan)) and os.path.exists(os.path.join(SHM, beside))
    for name in (beside, mapped):
        os.unlink(os.path.join(SHM, name))
