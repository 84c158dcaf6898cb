"""Seeded prompts: reproducible per point, never special tokens, warm-up never equal to timed."""

from workloads.random_ids import allowed_token_ids, make_prompts


def test_prompts_avoid_special_tokens_and_are_reproducible():
    allowed = allowed_token_ids(50, {0, 1, 2})
    a = make_prompts(allowed, 7, 4, 200, 8, "timed", 0)
    assert a == make_prompts(allowed, 7, 4, 200, 8, "timed", 0)
    flat = {t for row in a for t in row}
    assert not flat & {0, 1, 2} and flat <= set(range(3, 50))
    assert len(a) == 4 and all(len(row) == 200 for row in a)


def test_phases_batches_and_seeds_differ():
    allowed = allowed_token_ids(32000, {1, 2})
    base = make_prompts(allowed, 0, 2, 64, 8, "timed", 0)
    assert base != make_prompts(allowed, 0, 2, 64, 8, "warmup", 0)
    assert base != make_prompts(allowed, 0, 2, 64, 8, "timed", 1)
    assert base != make_prompts(allowed, 1, 2, 64, 8, "timed", 0)
    assert base[0] != base[1]
