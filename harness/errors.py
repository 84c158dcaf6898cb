"""Errors the user can fix. The CLI prints them as one line and exits with code 2."""


class UserError(Exception):
    """Bad config, CLI or input: reported as `error: <message>` with exit code 2, no traceback.

    The message names what is wrong (the key path where there is one) and what is allowed.
    """


class ShortOutputError(RuntimeError):
    """A sequence came back with fewer tokens than the point asked for; its timings are meaningless."""


def known_names(name: str, known: list) -> str:
    """` (known: a, b; did you mean 'a'?)`: the tail of an unknown-name message."""
    import difflib

    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f" (known: {', '.join(known)}){hint}"
